//! Background threads' control, shared by hunter's metadata workers,
//! amber's buffer write-back and lawn's idle-time write-back: each thread
//! sleeps for its interval or until woken, runs one turn holding `turn`,
//! and stops when told; a stop waits out the turn in progress, so nothing
//! is written after unmount marks the pool clean.

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

/// Sleep, wake-up and stop for one group of background threads.
#[derive(Default)]
pub(super) struct Control {
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

    /// Stops the threads: every later `sleep` returns false, and a turn
    /// in progress is waited out.
    pub fn stop(&self) {
        {
            let _g = self.lock.lock();
            self.stop.store(true, Relaxed);
            self.wake.notify_all();
        }
        drop(self.turn.lock());
    }

    /// Whether the threads were told to stop: a long turn checks it
    /// between steps.
    pub fn stopped(&self) -> bool {
        self.stop.load(Relaxed)
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
