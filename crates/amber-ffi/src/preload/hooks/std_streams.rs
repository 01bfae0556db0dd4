//! libc's standard streams on served descriptors. A shell's redirect
//! (`echo hi > /amp/f`: open, then dup2 onto 1) makes descriptor 0, 1 or
//! 2 a served one, but glibc writes `stdout` through internal calls no
//! hook sees, which reach the descriptor's kernel placeholder and fail
//! with EBADF. So while 0, 1 or 2 is served, libc's `stdin`, `stdout` or
//! `stderr` is a FILE of ours on it (fopencookie, as fopen of a served
//! file gets), which leaves the descriptor open when closed; when the
//! descriptor stops being served (a kernel descriptor dup'd onto it, or
//! its close) that FILE is flushed and closed, and libc's own is put
//! back. Programs that kept a copy of the old pointer still write through
//! libc's FILE (and fail as before).

use std::ffi::{c_int, CStr};

use libc::FILE;
use parking_lot::Mutex;

use super::stdio::{borrowed_stream, is_stream};

extern "C" {
    static mut stdin: *mut FILE;
    static mut stdout: *mut FILE;
    static mut stderr: *mut FILE;
}

/// libc's own stream for 0, 1 and 2 while ours stands in (0: none).
static SAVED: Mutex<[usize; 3]> = Mutex::new([0; 3]);

/// The variable that names descriptor `fd`'s standard stream.
fn variable(fd: usize) -> *mut *mut FILE {
    match fd {
        0 => &raw mut stdin,
        1 => &raw mut stdout,
        _ => &raw mut stderr,
    }
}

fn standard(fd: c_int) -> Option<usize> {
    usize::try_from(fd).ok().filter(|&fd| fd <= 2)
}

/// Served descriptor `fd` was just made (dup2 onto it): if it is 0, 1 or
/// 2, its standard stream becomes ours on it.
pub fn now_served(fd: c_int) {
    let Some(i) = standard(fd) else { return };
    let mut saved = SAVED.lock();
    if saved[i] != 0 {
        return; // ours already, and it reads and writes `fd` by number
    }
    let mode: &CStr = if i == 0 { c"r" } else { c"w" };
    let Ok(ours) = borrowed_stream(fd, mode) else {
        return; // out of memory: libc's stays, and fails as it did
    };
    // SAFETY: libc's stream variables are valid for reads and writes; a
    // program swapping them on another thread meanwhile races libc too.
    // `ours` is a fresh stream; stderr stays unbuffered, as libc's.
    unsafe {
        let theirs = *variable(i);
        if i == 2 {
            libc::setvbuf(ours, std::ptr::null_mut(), libc::_IONBF, 0);
        }
        *variable(i) = ours;
        saved[i] = theirs as usize;
    }
}

/// Before descriptor `old` is dup'd onto `new`: our stream on `new` goes
/// (`no_longer_served`); or, where a served descriptor replaces a kernel
/// one, libc's stream writes out what it holds while it still can (its
/// writes would reach the placeholder after).
pub fn before_dup(old_served: bool, new_served: bool, new: c_int) {
    let Some(i) = standard(new) else { return };
    if new_served {
        no_longer_served(new);
    } else if old_served && i > 0 {
        // SAFETY: libc's stream variable is valid; fflush of its stream.
        unsafe { libc::fflush(*variable(i)) };
    }
}

/// Descriptor `fd` is about to stop being served (closed, or another
/// descriptor dup'd onto it): our stream on it, if any, writes out what
/// it holds and libc's own comes back.
pub fn no_longer_served(fd: c_int) {
    let Some(i) = standard(fd) else { return };
    let mut saved = SAVED.lock();
    let theirs = std::mem::take(&mut saved[i]);
    if theirs == 0 {
        return;
    }
    // SAFETY: as in `now_served`; the variable holds our stream, which
    // only this function closes, leaving the descriptor open.
    unsafe {
        let ours = *variable(i);
        *variable(i) = theirs as *mut FILE;
        // Unless the program closed it itself (fclose(stdout)).
        if is_stream(ours) {
            libc::fclose(ours);
        }
    }
}
