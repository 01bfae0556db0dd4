//! The stdio family on served files. glibc's fopen reaches the kernel
//! through internal calls no symbol hook sees, so a served path gets a
//! FILE made with fopencookie whose read, write, seek and close are this
//! library's hooks on a served descriptor: fread, fwrite, fgets, fprintf,
//! fflush, fseek, ftell and fclose then work unchanged. fileno of such a
//! FILE is its served descriptor. freopen works on these FILEs; on one
//! of libc's own (stdin, stdout, ...) it cannot point it at a served file
//! and fails with EOPNOTSUPP, saying so once.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};

use libc::{off64_t, size_t, ssize_t, FILE};
use parking_lot::Mutex;

use crate::abi::{outside_user_space, ret};
use crate::posix::errno::tell_once;
use crate::posix::resolve::Found;
use crate::posix::{Errno, PResult, Pool};
use crate::preload::real;
use crate::preload::route::on_path;
use crate::preload::state;

#[repr(C)]
struct CookieIo {
    read: Option<unsafe extern "C" fn(*mut c_void, *mut c_char, size_t) -> ssize_t>,
    write: Option<unsafe extern "C" fn(*mut c_void, *const c_char, size_t) -> ssize_t>,
    seek: Option<unsafe extern "C" fn(*mut c_void, *mut off64_t, c_int) -> c_int>,
    close: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
}

extern "C" {
    fn fopencookie(cookie: *mut c_void, mode: *const c_char, io: CookieIo) -> *mut FILE;
}

/// What a served FILE's callbacks get: its descriptor, and whether
/// closing the FILE closes it (not for libc's standard streams pointed at
/// descriptor 0, 1 or 2: std_streams.rs).
struct Cookie {
    fd: AtomicI32,
    owned: bool,
}

/// Served FILEs, by address, and their cookies.
static STREAMS: Mutex<Option<HashMap<usize, usize>>> = Mutex::new(None);
static STREAM_COUNT: AtomicUsize = AtomicUsize::new(0);
static FREOPEN_TOLD: AtomicBool = AtomicBool::new(false);

/// # Safety
/// `c` is a cookie made by `stream`.
unsafe fn fd_of(c: *mut c_void) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { &*c.cast::<Cookie>() }.fd.load(Ordering::Relaxed)
}

unsafe extern "C" fn c_read(c: *mut c_void, b: *mut c_char, n: size_t) -> ssize_t {
    // SAFETY: glibc passes the cookie and a buffer of `n` bytes.
    unsafe { super::read(fd_of(c), b.cast(), n) }
}

unsafe extern "C" fn c_write(c: *mut c_void, b: *const c_char, n: size_t) -> ssize_t {
    // SAFETY: glibc passes the cookie and `n` bytes; a cookie write
    // reports errors as 0.
    unsafe { super::write(fd_of(c), b.cast(), n) }.max(0)
}

unsafe extern "C" fn c_seek(c: *mut c_void, off: *mut off64_t, whence: c_int) -> c_int {
    // SAFETY: glibc passes the cookie and a valid offset.
    unsafe {
        let at = super::lseek64(fd_of(c), *off, whence);
        if at < 0 {
            return -1;
        }
        *off = at;
    }
    0
}

unsafe extern "C" fn c_close(c: *mut c_void) -> c_int {
    {
        let mut s = STREAMS.lock();
        if let Some(map) = s.as_mut() {
            map.retain(|_, cookie| *cookie != c as usize);
            STREAM_COUNT.store(map.len(), Ordering::Relaxed);
        }
    }
    // SAFETY: the cookie was Box::into_raw'd by `stream`; glibc closes a
    // stream once.
    let cookie = unsafe { Box::from_raw(c.cast::<Cookie>()) };
    if !cookie.owned {
        return 0;
    }
    // SAFETY: no pointers.
    unsafe { super::close(cookie.fd.load(Ordering::Relaxed)) }
}

/// A FILE on served descriptor `fd` (which it owns from now on).
fn stream(fd: c_int, mode: *const c_char) -> PResult<*mut FILE> {
    make_stream(fd, mode, true)
}

/// A FILE on served descriptor `fd` that leaves it open when closed.
pub(crate) fn borrowed_stream(fd: c_int, mode: &CStr) -> PResult<*mut FILE> {
    make_stream(fd, mode.as_ptr(), false)
}

fn make_stream(fd: c_int, mode: *const c_char, owned: bool) -> PResult<*mut FILE> {
    let cookie = Box::into_raw(Box::new(Cookie {
        fd: AtomicI32::new(fd),
        owned,
    }));
    let io = CookieIo {
        read: Some(c_read),
        write: Some(c_write),
        seek: Some(c_seek),
        close: Some(c_close),
    };
    // SAFETY: a fresh cookie, a mode string from the caller, and
    // callbacks with fopencookie's signatures.
    let f = unsafe { fopencookie(cookie.cast(), mode, io) };
    if f.is_null() {
        // SAFETY: not handed to glibc after all.
        drop(unsafe { Box::from_raw(cookie) });
        return Err(Errno(libc::ENOMEM));
    }
    let mut s = STREAMS.lock();
    let map = s.get_or_insert_with(HashMap::new);
    map.insert(f as usize, cookie as usize);
    STREAM_COUNT.store(map.len(), Ordering::Relaxed);
    Ok(f)
}

/// Flushes every served FILE: at exit, before the pool is unmounted
/// (glibc flushes the streams only after the atexit handlers, ours
/// among them, have run).
pub(crate) fn flush_served_streams() {
    if STREAM_COUNT.load(Ordering::Relaxed) == 0 {
        return;
    }
    let files: Vec<usize> = STREAMS
        .lock()
        .as_ref()
        .map(|m| m.keys().copied().collect())
        .unwrap_or_default();
    for f in files {
        // SAFETY: a registered stream is open until its close callback
        // unregisters it, and nothing closes it while the process exits.
        unsafe { libc::fflush(f as *mut FILE) };
    }
}

/// Whether `f` is a served FILE still open.
pub(crate) fn is_stream(f: *mut FILE) -> bool {
    cookie_of(f).is_some()
}

/// The cookie of a served FILE.
fn cookie_of(f: *mut FILE) -> Option<&'static Cookie> {
    if STREAM_COUNT.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let c = *STREAMS.lock().as_ref()?.get(&(f as usize))?;
    // SAFETY: registered cookies live until their stream's close.
    Some(unsafe { &*(c as *const Cookie) })
}

/// open(2) flags of an fopen mode.
///
/// # Safety
/// `mode` is NULL or NUL-terminated.
unsafe fn mode_flags(mode: *const c_char) -> PResult<c_int> {
    // SAFETY: the caller's contract.
    let m = unsafe { crate::abi::bytes(mode) }?;
    let mut fl = match m.first() {
        Some(b'r') => libc::O_RDONLY,
        Some(b'w') => libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
        Some(b'a') => libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND,
        _ => return Err(Errno(libc::EINVAL)),
    };
    for &c in m[1..].iter().take_while(|&&c| c != b',') {
        match c {
            b'+' => fl = (fl & !libc::O_ACCMODE) | libc::O_RDWR,
            b'e' => fl |= libc::O_CLOEXEC,
            b'x' => fl |= libc::O_EXCL,
            _ => {}
        }
    }
    Ok(fl)
}

pub unsafe fn fopen64(p: *const c_char, mode: *const c_char) -> *mut FILE {
    // SAFETY: the caller's contract.
    let fl = unsafe { mode_flags(mode) };
    let served = |pool: &'static Pool, f: &Found| {
        let fl = fl?;
        let file = pool.open_found(f, fl, 0o666, state::umask())?;
        let fd = pool.install(file, fl & libc::O_CLOEXEC != 0)?;
        stream(fd, mode).inspect_err(|_| {
            let _ = pool.close_fd(fd);
        })
    };
    // SAFETY: the caller's contract.
    unsafe {
        on_path(
            libc::AT_FDCWD,
            p,
            true,
            |k| opened(real::fopen64(k, mode)),
            served,
            std::ptr::null_mut(),
        )
    }
}

/// A stream libc opened: its descriptor, made by libc's own open (or,
/// for freopen, its own dup3) where no hook sees it, may carry the lease
/// path's hints of a number closed behind the hooks (fclose's own close):
/// they go. The mount's close count already has a leased descriptor
/// asked again (design.md §17.9); this forgets the hints of any other,
/// such as a pipe's `ELSEWHERE`, that would keep a file on the mount
/// from ever being leased.
///
/// # Safety
/// `s` is null or a live stream.
unsafe fn opened(s: *mut FILE) -> *mut FILE {
    if !s.is_null() {
        // SAFETY: a live stream, by the caller's contract.
        crate::preload::lessee::forget(unsafe { real::fileno(s) });
    }
    s
}

pub unsafe fn fopen(p: *const c_char, mode: *const c_char) -> *mut FILE {
    // SAFETY: forwarded contract.
    unsafe { fopen64(p, mode) }
}

pub unsafe fn fdopen(fd: c_int, mode: *const c_char) -> *mut FILE {
    match state::served_fd(fd) {
        // SAFETY: the caller's contract.
        None => unsafe { real::fdopen(fd, mode) },
        Some(r) => ret(r.and_then(|_| stream(fd, mode)), std::ptr::null_mut()),
    }
}

pub unsafe fn freopen64(p: *const c_char, mode: *const c_char, s: *mut FILE) -> *mut FILE {
    let Some(cookie) = cookie_of(s) else {
        // SAFETY: the caller's contract for `p`.
        let to_pool = !outside_user_space(p)
            && state::config().is_some_and(|cfg| {
                // SAFETY: a user-space pointer, NUL-terminated by the caller's contract.
                let b = unsafe { CStr::from_ptr(p) }.to_bytes();
                crate::posix::resolve::under_mount(&cfg.mount, b).is_some()
                    && state::own(cfg).is_some()
            });
        if to_pool {
            tell_once(&FREOPEN_TOLD, "freopen cannot point libc's own streams (stdin, stdout, ...) at a served file (EOPNOTSUPP)");
            return ret(Err(Errno(libc::EOPNOTSUPP)), std::ptr::null_mut());
        }
        // SAFETY: the caller's contract.
        return unsafe { opened(real::freopen64(p, mode, s)) };
    };
    if p.is_null() {
        return s; // a mode change: the descriptor stays
    }
    // SAFETY: the caller's contract.
    let fl = unsafe { mode_flags(mode) };
    let Ok(fl) = fl else {
        return ret(fl.map(|_| std::ptr::null_mut()), std::ptr::null_mut());
    };
    // SAFETY: the caller's contract; the new file goes through the hooks,
    // so it may be served or the kernel's.
    let fd = unsafe { super::openat64(libc::AT_FDCWD, p, fl, 0o666) };
    if fd < 0 {
        return std::ptr::null_mut();
    }
    // SAFETY: `s` is a live served stream.
    unsafe { libc::fflush(s) };
    let old = cookie.fd.swap(fd, Ordering::Relaxed);
    // SAFETY: `s` is a live stream; repositioning drops its buffers.
    unsafe {
        super::close(old);
        libc::fseek(s, 0, libc::SEEK_SET);
    }
    s
}

pub unsafe fn freopen(p: *const c_char, mode: *const c_char, s: *mut FILE) -> *mut FILE {
    // SAFETY: forwarded contract.
    unsafe { freopen64(p, mode, s) }
}

pub unsafe fn fileno(s: *mut FILE) -> c_int {
    match cookie_of(s) {
        Some(c) => c.fd.load(Ordering::Relaxed),
        // SAFETY: the caller's contract.
        None => unsafe { real::fileno(s) },
    }
}

pub unsafe fn fileno_unlocked(s: *mut FILE) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { fileno(s) }
}
