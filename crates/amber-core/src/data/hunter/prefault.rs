//! Mapping a data log's fresh run ahead of its writer
//! (`PmDevice::populate`). A pool file's pages (tmpfs, a DAX file) are
//! otherwise mapped one fault per block on first touch, which cost a
//! synced 4 KiB write under `dram` ~20% of its time; mapping the whole
//! 2 MiB run in the writer's own call still cost it ~9%. A thread maps
//! each run as a log takes it, while the writer starts on its first
//! blocks. Where the thread is not running (the simulated clock, a thread
//! that failed to start, or after unmount began) the writer maps the run
//! itself, so a run is always mapped ahead either way: the hint never
//! changes a byte, only who waits for the pages.

use crate::data::control::{spawn as spawn_thread, Control};
use crate::fs::Core;
use crate::time::ClockSource;
use amber_pmem::PmDevice;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Runs waiting for the thread; beyond it a writer maps its run itself
/// (16 logs, each a run or two ahead).
const MAX_WAITING: usize = 32;

/// How long the thread sleeps without a request before it looks whether
/// its pool was dropped without an unmount (a crash in a test, a process
/// that never unmounted): it then ends instead of sleeping forever.
const IDLE_CHECK: Duration = Duration::from_secs(1);

#[derive(Default)]
pub(super) struct Prefault {
    /// Byte ranges of the pool to map, oldest first.
    waiting: Mutex<Vec<(u64, u64)>>,
    running: AtomicBool,
    control: Control,
}

impl Prefault {
    /// Maps `[off, off + len)` of the pool: on the thread if it runs and
    /// has room, else now.
    pub fn request<D: PmDevice>(&self, dev: &D, off: u64, len: u64) {
        if self.running.load(Ordering::Acquire) {
            let mut waiting = self.waiting.lock();
            if waiting.len() < MAX_WAITING {
                waiting.push((off, len));
                drop(waiting);
                self.control.wake();
                return;
            }
        }
        dev.populate(off, len);
    }

    /// Starts the thread, except under the simulated clock (whose runs
    /// must stay a function of their seed; its devices map nothing).
    pub fn spawn<D: PmDevice>(self: &Arc<Self>, core: Weak<Core<D>>) {
        if core
            .upgrade()
            .is_none_or(|fs| fs.options().clock == ClockSource::Simulated)
        {
            return;
        }
        let me = Arc::clone(self);
        spawn_thread("amber-prefault".into(), move || me.run(&core));
    }

    fn run<D: PmDevice>(&self, core: &Weak<Core<D>>) {
        self.running.store(true, Ordering::Release);
        while self.control.sleep(Some(IDLE_CHECK)) {
            let _turn = self.control.turn();
            let Some(fs) = core.upgrade() else { break };
            let runs = std::mem::take(&mut *self.waiting.lock());
            for (off, len) in runs {
                fs.device().populate(off, len);
            }
        }
        self.running.store(false, Ordering::Release);
    }

    /// Stops the thread (waiting out a run in progress); later requests
    /// are mapped by their writers.
    pub fn stop(&self) {
        self.running.store(false, Ordering::Release);
        self.control.stop();
    }
}
