//! A core error as the kernel's errno: the table is amber-posix's, shared
//! with the C ABI. Errors that mean the pool itself is in trouble are
//! logged here as well, because the process that sees the errno (EIO)
//! cannot tell the administrator anything more.

use std::sync::atomic::{AtomicBool, Ordering};

use amber_core::FsError;
use fuser::Errno;

/// A poisoned pool fails every later write the same way; one log line
/// says it, thousands would bury it.
static POISON_LOGGED: AtomicBool = AtomicBool::new(false);

/// The errno a failed core operation returns to the kernel.
pub fn errno(e: &FsError) -> Errno {
    if amber_posix::is_pool_trouble(e) {
        if !matches!(e, FsError::Poisoned(_)) {
            crate::log(format_args!("I/O error: {e}"));
        } else if !POISON_LOGGED.swap(true, Ordering::Relaxed) {
            crate::log(format_args!("I/O error, every later write fails too: {e}"));
        }
    }
    Errno::from_i32(amber_posix::errno(e))
}
