//! Kernel descriptor numbers for served files. Each is an O_PATH
//! descriptor of /dev/null: the kernel refuses read, write, mmap, ioctl
//! and the like on it with EBADF, and lookups relative to it with ENOTDIR,
//! so a call that reaches the kernel with a served descriptor fails rather
//! than touching some other file. Made with raw system calls, so the
//! interposer's own hooks never see them.

use super::errno::{Errno, PResult};

/// A new O_PATH descriptor of /dev/null.
pub fn fd(cloexec: bool) -> PResult<i32> {
    let flags = libc::O_PATH | if cloexec { libc::O_CLOEXEC } else { 0 };
    // SAFETY: openat with a NUL-terminated static path and no pointer
    // arguments besides it; the result is a descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            c"/dev/null".as_ptr(),
            flags,
        )
    };
    if fd < 0 {
        return Err(last());
    }
    i32::try_from(fd).map_err(|_| Errno(libc::EMFILE))
}

/// Closes a reserved descriptor.
pub fn close(fd: i32) {
    // SAFETY: closing a descriptor number this module reserved; the
    // table entry naming it is already gone.
    unsafe { libc::syscall(libc::SYS_close, fd) };
}

/// dup3 at the kernel: makes `to` (closing what it was) a copy of `from`.
pub fn dup3(from: i32, to: i32, cloexec: bool) -> PResult<i32> {
    let flags = if cloexec { libc::O_CLOEXEC } else { 0 };
    // SAFETY: dup3 takes only integers.
    let r = unsafe { libc::syscall(libc::SYS_dup3, from, to, flags) };
    if r < 0 {
        Err(last())
    } else {
        Ok(to)
    }
}

/// The calling thread's errno.
pub fn last() -> Errno {
    Errno(
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO),
    )
}
