//! Background threads' control, shared by hunter's metadata workers,
//! amber's buffer write-back and lawn's idle-time write-back: each thread
//! sleeps for its interval or until woken, runs one turn holding `turn`,
//! and stops when told; a stop waits out the turn in progress, so nothing
//! is written after unmount marks the pool clean.

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::Duration;

/// What every background thread runs first, when a front end set it.
static THREAD_START: OnceLock<fn()> = OnceLock::new();

/// Sets what every background thread of every pool in this process runs
/// before its work, once (a later call is ignored; returns whether this
/// one took effect). The interposer gives its threads their own copy of
/// the descriptor table here and closes it: the program's descriptor
/// calls then stay on Linux's fast path for a single-user table, which
/// threads sharing the table lose (they never use a descriptor).
pub fn on_background_thread_start(f: fn()) -> bool {
    THREAD_START.set(f).is_ok()
}

/// Starts background thread `name` running `work`, after the start hook.
/// A thread that cannot be started is not an error: every policy stays
/// correct without its threads (`DataPolicy::spawn`).
pub(super) fn spawn(name: String, work: impl FnOnce() + Send + 'static) {
    let _ = std::thread::Builder::new().name(name).spawn(move || {
        if let Some(start) = THREAD_START.get() {
            start();
        }
        work();
    });
}

/// How a `Control::nap` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Nap {
    Stopped,
    Woken,
    Elapsed,
}

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

    /// Sleeps for `d` or until woken, and says which (a spurious wake-up
    /// counts as woken: one more turn, never one fewer).
    pub fn nap(&self, d: Duration) -> Nap {
        let mut g = self.lock.lock();
        if self.stop.load(Relaxed) {
            return Nap::Stopped;
        }
        if self.early.swap(false, Relaxed) {
            return Nap::Woken;
        }
        let timed_out = self.wake.wait_for(&mut g, d).timed_out();
        if self.stop.load(Relaxed) {
            Nap::Stopped
        } else if self.early.swap(false, Relaxed) || !timed_out {
            Nap::Woken
        } else {
            Nap::Elapsed
        }
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
