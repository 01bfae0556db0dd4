//! libc's own functions, found the first time each is needed: what a
//! hook calls for everything it does not serve. libc's variadic open,
//! openat and fcntl are called with their optional argument always
//! present, which the x86-64 calling convention allows.
//!
//! In the shim (libamberfs_preload.so) a function is found with
//! dlsym(RTLD_NEXT), the next definition after the shim's own. The
//! served library is loaded with dlopen, outside that search order, so
//! the shim hands it a finder that asks from the shim's place
//! (`set_next`): the served library's libc is what the shim's would be,
//! never the shim's own export (which would call the served hook again).

use std::ffi::{c_char, c_int, c_ulong, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{dirent64, mode_t, off64_t, size_t, ssize_t, DIR, FILE};

use super::table::NextSymbol;

/// The finder the shim handed over (a `NextSymbol`), or 0: dlsym's
/// RTLD_NEXT from here.
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// Finds libc's functions with `next` from now on (set once, by the shim,
/// before any hook of the served library runs).
pub fn set_next(next: NextSymbol) {
    NEXT.store(next as usize, Ordering::Release);
}

/// The address of libc's `name` (NUL-terminated), cached in `slot`:
/// one load once found, so a passed-through call can end in a jump to
/// libc (the hook inlined around it).
#[inline]
pub fn lookup(slot: &AtomicUsize, name: &'static str) -> usize {
    match slot.load(Ordering::Relaxed) {
        0 => resolve(slot, name),
        f => f,
    }
}

/// Finds libc's `name` the first time it is needed.
#[cold]
fn resolve(slot: &AtomicUsize, name: &'static str) -> usize {
    let next = NEXT.load(Ordering::Acquire);
    let f = if next == 0 {
        // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name.
        unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) as usize }
    } else {
        // SAFETY: NEXT only ever holds a `NextSymbol` (`set_next`).
        let next: NextSymbol = unsafe { std::mem::transmute(next) };
        next(name.as_ptr().cast()) as usize
    };
    if f == 0 {
        // The program calls a function its libc lacks: nothing to fall
        // back to.
        let msg = format!("amberfs: libc has no {}\n", name.trim_end_matches('\0'));
        // SAFETY: write(2) to stderr of a buffer we own, then abort.
        unsafe {
            libc::syscall(libc::SYS_write, 2, msg.as_ptr(), msg.len());
            libc::abort();
        }
    }
    slot.store(f, Ordering::Relaxed);
    f
}

macro_rules! real {
    ($($name:ident($($a:ident: $t:ty),*) -> $r:ty;)*) => {$(
        /// libc's own function of this name.
        ///
        /// # Safety
        /// As the libc function.
        #[inline]
        pub unsafe fn $name($($a: $t),*) -> $r {
            static SLOT: AtomicUsize = AtomicUsize::new(0);
            let f = lookup(&SLOT, concat!(stringify!($name), "\0"));
            // SAFETY: `f` is libc's function of this name, whose C
            // signature this is.
            let f: unsafe extern "C" fn($($t),*) -> $r = unsafe { std::mem::transmute(f) };
            // SAFETY: the caller's contract.
            unsafe { f($($a),*) }
        }
    )*};
}

real! {
    open(p: *const c_char, f: c_int, m: mode_t) -> c_int;
    openat(d: c_int, p: *const c_char, f: c_int, m: mode_t) -> c_int;
    close(fd: c_int) -> c_int;
    close_range(first: u32, last: u32, flags: c_int) -> c_int;
    read(fd: c_int, b: *mut c_void, n: size_t) -> ssize_t;
    write(fd: c_int, b: *const c_void, n: size_t) -> ssize_t;
    pread64(fd: c_int, b: *mut c_void, n: size_t, o: off64_t) -> ssize_t;
    pwrite64(fd: c_int, b: *const c_void, n: size_t, o: off64_t) -> ssize_t;
    readv(fd: c_int, v: *const libc::iovec, n: c_int) -> ssize_t;
    writev(fd: c_int, v: *const libc::iovec, n: c_int) -> ssize_t;
    preadv64(fd: c_int, v: *const libc::iovec, n: c_int, o: off64_t) -> ssize_t;
    pwritev64(fd: c_int, v: *const libc::iovec, n: c_int, o: off64_t) -> ssize_t;
    preadv64v2(fd: c_int, v: *const libc::iovec, n: c_int, o: off64_t, f: c_int) -> ssize_t;
    pwritev64v2(fd: c_int, v: *const libc::iovec, n: c_int, o: off64_t, f: c_int) -> ssize_t;
    lseek64(fd: c_int, o: off64_t, w: c_int) -> off64_t;
    fstat64(fd: c_int, s: *mut libc::stat64) -> c_int;
    fstatat64(d: c_int, p: *const c_char, s: *mut libc::stat64, f: c_int) -> c_int;
    statx(d: c_int, p: *const c_char, f: c_int, m: u32, s: *mut libc::statx) -> c_int;
    fsync(fd: c_int) -> c_int;
    fdatasync(fd: c_int) -> c_int;
    syncfs(fd: c_int) -> c_int;
    sync_file_range(fd: c_int, o: off64_t, n: off64_t, f: u32) -> c_int;
    truncate64(p: *const c_char, l: off64_t) -> c_int;
    ftruncate64(fd: c_int, l: off64_t) -> c_int;
    fallocate64(fd: c_int, m: c_int, o: off64_t, l: off64_t) -> c_int;
    posix_fallocate64(fd: c_int, o: off64_t, l: off64_t) -> c_int;
    posix_fadvise64(fd: c_int, o: off64_t, l: off64_t, a: c_int) -> c_int;
    unlinkat(d: c_int, p: *const c_char, f: c_int) -> c_int;
    renameat2(od: c_int, o: *const c_char, nd: c_int, n: *const c_char, f: u32) -> c_int;
    mkdirat(d: c_int, p: *const c_char, m: mode_t) -> c_int;
    symlinkat(t: *const c_char, d: c_int, p: *const c_char) -> c_int;
    linkat(od: c_int, o: *const c_char, nd: c_int, n: *const c_char, f: c_int) -> c_int;
    readlinkat(d: c_int, p: *const c_char, b: *mut c_char, n: size_t) -> ssize_t;
    faccessat(d: c_int, p: *const c_char, m: c_int, f: c_int) -> c_int;
    fchmodat(d: c_int, p: *const c_char, m: mode_t, f: c_int) -> c_int;
    fchmod(fd: c_int, m: mode_t) -> c_int;
    fchownat(d: c_int, p: *const c_char, u: libc::uid_t, g: libc::gid_t, f: c_int) -> c_int;
    fchown(fd: c_int, u: libc::uid_t, g: libc::gid_t) -> c_int;
    utimensat(d: c_int, p: *const c_char, t: *const libc::timespec, f: c_int) -> c_int;
    futimens(fd: c_int, t: *const libc::timespec) -> c_int;
    dup(fd: c_int) -> c_int;
    dup3(o: c_int, n: c_int, f: c_int) -> c_int;
    fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int;
    flock(fd: c_int, op: c_int) -> c_int;
    chdir(p: *const c_char) -> c_int;
    fchdir(fd: c_int) -> c_int;
    getcwd(b: *mut c_char, n: size_t) -> *mut c_char;
    umask(m: mode_t) -> mode_t;
    statfs64(p: *const c_char, s: *mut libc::statfs64) -> c_int;
    fstatfs64(fd: c_int, s: *mut libc::statfs64) -> c_int;
    statvfs64(p: *const c_char, s: *mut libc::statvfs64) -> c_int;
    fstatvfs64(fd: c_int, s: *mut libc::statvfs64) -> c_int;
    mmap64(a: *mut c_void, l: size_t, p: c_int, f: c_int, fd: c_int, o: off64_t) -> *mut c_void;
    munmap(a: *mut c_void, l: size_t) -> c_int;
    mprotect(a: *mut c_void, l: size_t, p: c_int) -> c_int;
    msync(a: *mut c_void, l: size_t, f: c_int) -> c_int;
    madvise(a: *mut c_void, l: size_t, v: c_int) -> c_int;
    mremap(a: *mut c_void, o: size_t, n: size_t, f: c_int, to: *mut c_void) -> *mut c_void;
    opendir(p: *const c_char) -> *mut DIR;
    fdopendir(fd: c_int) -> *mut DIR;
    readdir64(d: *mut DIR) -> *mut dirent64;
    closedir(d: *mut DIR) -> c_int;
    rewinddir(d: *mut DIR) -> ();
    telldir(d: *mut DIR) -> libc::c_long;
    seekdir(d: *mut DIR, p: libc::c_long) -> ();
    dirfd(d: *mut DIR) -> c_int;
    fopen64(p: *const c_char, m: *const c_char) -> *mut FILE;
    fdopen(fd: c_int, m: *const c_char) -> *mut FILE;
    freopen64(p: *const c_char, m: *const c_char, s: *mut FILE) -> *mut FILE;
    fileno(s: *mut FILE) -> c_int;
    execve(p: *const c_char, a: *const *const c_char, e: *const *const c_char) -> c_int;
    execvpe(p: *const c_char, a: *const *const c_char, e: *const *const c_char) -> c_int;
    execv(p: *const c_char, a: *const *const c_char) -> c_int;
    execvp(p: *const c_char, a: *const *const c_char) -> c_int;
    fexecve(fd: c_int, a: *const *const c_char, e: *const *const c_char) -> c_int;
    getxattr(p: *const c_char, n: *const c_char, v: *mut c_void, s: size_t) -> ssize_t;
    lgetxattr(p: *const c_char, n: *const c_char, v: *mut c_void, s: size_t) -> ssize_t;
    fgetxattr(fd: c_int, n: *const c_char, v: *mut c_void, s: size_t) -> ssize_t;
    setxattr(p: *const c_char, n: *const c_char, v: *const c_void, s: size_t, f: c_int) -> c_int;
    lsetxattr(p: *const c_char, n: *const c_char, v: *const c_void, s: size_t, f: c_int) -> c_int;
    fsetxattr(fd: c_int, n: *const c_char, v: *const c_void, s: size_t, f: c_int) -> c_int;
    listxattr(p: *const c_char, l: *mut c_char, s: size_t) -> ssize_t;
    llistxattr(p: *const c_char, l: *mut c_char, s: size_t) -> ssize_t;
    flistxattr(fd: c_int, l: *mut c_char, s: size_t) -> ssize_t;
    removexattr(p: *const c_char, n: *const c_char) -> c_int;
    lremovexattr(p: *const c_char, n: *const c_char) -> c_int;
    fremovexattr(fd: c_int, n: *const c_char) -> c_int;
}
