//! Errors as errno values: the C ABI's and the interposer's edge. A core
//! error becomes an errno here, by amber-posix's table (the FUSE
//! adapter's too); errors that mean the pool itself is in
//! trouble are also printed once, since the caller only sees EIO.

use std::sync::atomic::{AtomicBool, Ordering};

use amber_core::FsError;

/// An errno value: what every POSIX-shaped call here fails with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

/// The result of a POSIX-shaped call.
pub type PResult<T> = Result<T, Errno>;

/// A poisoned pool fails every later write the same way; say it once.
static POISON_TOLD: AtomicBool = AtomicBool::new(false);

impl From<FsError> for Errno {
    /// amber-posix's table, the FUSE adapter's too.
    fn from(e: FsError) -> Errno {
        if amber_posix::is_pool_trouble(&e) {
            if !matches!(e, FsError::Poisoned(_)) {
                eprintln!("amberfs: I/O error: {e}");
            } else if !POISON_TOLD.swap(true, Ordering::Relaxed) {
                eprintln!("amberfs: I/O error, every later write fails too: {e}");
            }
        }
        Errno(amber_posix::errno(&e))
    }
}

/// Prints `message` on stderr the first time `told` is passed: for calls
/// the interposer cannot serve, which fail with an errno that alone would
/// not say why.
pub fn tell_once(told: &AtomicBool, message: &str) {
    if !told.swap(true, Ordering::Relaxed) {
        eprintln!("amberfs: {message}");
    }
}
