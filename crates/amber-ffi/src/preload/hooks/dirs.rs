//! Directory streams on served directories: opendir and fdopendir give a
//! DIR of this library's (glibc's opendir reaches the kernel through
//! internal calls), which readdir, telldir, seekdir, rewinddir, dirfd and
//! closedir recognize; any other DIR goes to libc.

use std::cell::UnsafeCell;
use std::collections::HashSet;
use std::ffi::{c_char, c_int, c_long};
use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{dirent64, DIR};
use parking_lot::Mutex;

use crate::abi::ret;
use crate::posix::dir::{d_type, DirStream};
use crate::posix::resolve::Found;
use crate::posix::{Errno, PResult, Pool};
use crate::preload::real;
use crate::preload::route::on_path;
use crate::preload::state;

struct ServedDir {
    fd: c_int,
    stream: Mutex<DirStream>,
    /// What readdir returns a pointer to, valid until the next readdir.
    entry: UnsafeCell<dirent64>,
}

static DIRS: Mutex<Option<HashSet<usize>>> = Mutex::new(None);
static DIR_COUNT: AtomicUsize = AtomicUsize::new(0);

fn ours(d: *mut DIR) -> Option<&'static ServedDir> {
    if DIR_COUNT.load(Ordering::Relaxed) == 0 {
        return None;
    }
    DIRS.lock().as_ref()?.contains(&(d as usize)).then(|| {
        // SAFETY: registered pointers are live ServedDirs until closedir.
        unsafe { &*(d as *const ServedDir) }
    })
}

/// A DIR on served directory descriptor `fd` (which it owns).
fn served_dir(pool: &Pool, fd: c_int) -> PResult<*mut DIR> {
    let file = pool
        .files
        .with(fd, |f| f.clone())
        .ok_or(Errno(libc::EBADF))?;
    let stream = Mutex::new(DirStream::new(file)?);
    // SAFETY: dirent64 is plain integers and bytes; zero is valid.
    let entry = UnsafeCell::new(unsafe { std::mem::zeroed() });
    let d = Box::into_raw(Box::new(ServedDir { fd, stream, entry }));
    let mut dirs = DIRS.lock();
    let set = dirs.get_or_insert_with(HashSet::new);
    set.insert(d as usize);
    DIR_COUNT.store(set.len(), Ordering::Relaxed);
    Ok(d.cast())
}

pub unsafe fn opendir(p: *const c_char) -> *mut DIR {
    let served = |pool: &'static Pool, f: &Found| {
        let file = pool.open_found(f, libc::O_RDONLY | libc::O_DIRECTORY, 0, 0)?;
        let fd = pool.install(file, true)?;
        served_dir(pool, fd).inspect_err(|_| {
            let _ = pool.close_fd(fd);
        })
    };
    // SAFETY: the caller's contract.
    unsafe {
        on_path(
            libc::AT_FDCWD,
            p,
            true,
            |k| real::opendir(k),
            served,
            std::ptr::null_mut(),
        )
    }
}

pub unsafe fn fdopendir(fd: c_int) -> *mut DIR {
    match state::served_fd(fd) {
        // SAFETY: no pointers.
        None => unsafe { real::fdopendir(fd) },
        Some(r) => ret(
            r.and_then(|(pool, _pass, _in)| served_dir(pool, fd)),
            std::ptr::null_mut(),
        ),
    }
}

fn next(d: &ServedDir) -> PResult<*mut dirent64> {
    let pool = state::owned().ok_or(Errno(libc::EBADF))?;
    let _pass = pool.enter()?;
    let _inside = state::Inside::enter();
    let Some(e) = d.stream.lock().next(pool.core())? else {
        return Ok(std::ptr::null_mut());
    };
    // SAFETY: the entry belongs to this stream; a caller may not read an
    // entry after the stream's next readdir (POSIX), so no one reads it now.
    let out = unsafe { &mut *d.entry.get() };
    out.d_ino = e.ino;
    out.d_off = e.next as i64;
    out.d_reclen = std::mem::size_of::<dirent64>() as u16;
    out.d_type = d_type(e.kind);
    out.d_name = [0; 256];
    for (o, &b) in out.d_name.iter_mut().zip(e.name.iter().take(255)) {
        *o = b as c_char;
    }
    Ok(out)
}

pub unsafe fn readdir64(d: *mut DIR) -> *mut dirent64 {
    match ours(d) {
        Some(sd) => ret(next(sd), std::ptr::null_mut()),
        // SAFETY: the caller's contract.
        None => unsafe { real::readdir64(d) },
    }
}

pub unsafe fn readdir(d: *mut DIR) -> *mut dirent64 {
    // SAFETY: forwarded contract (dirent and dirent64 share a layout).
    unsafe { readdir64(d) }
}

pub unsafe fn closedir(d: *mut DIR) -> c_int {
    let Some(sd) = ours(d) else {
        // SAFETY: the caller's contract.
        return unsafe { real::closedir(d) };
    };
    {
        let mut dirs = DIRS.lock();
        if let Some(set) = dirs.as_mut() {
            set.remove(&(d as usize));
            DIR_COUNT.store(set.len(), Ordering::Relaxed);
        }
    }
    let fd = sd.fd;
    // SAFETY: from Box::into_raw in served_dir, now unregistered.
    drop(unsafe { Box::from_raw(d.cast::<ServedDir>()) });
    // SAFETY: no pointers.
    unsafe { super::close(fd) }
}

pub unsafe fn rewinddir(d: *mut DIR) {
    match ours(d) {
        Some(sd) => sd.stream.lock().seek(0),
        // SAFETY: the caller's contract.
        None => unsafe { real::rewinddir(d) },
    }
}

pub unsafe fn telldir(d: *mut DIR) -> c_long {
    match ours(d) {
        Some(sd) => sd.stream.lock().tell() as c_long,
        // SAFETY: the caller's contract.
        None => unsafe { real::telldir(d) },
    }
}

pub unsafe fn seekdir(d: *mut DIR, pos: c_long) {
    match ours(d) {
        Some(sd) => sd.stream.lock().seek(pos.max(0) as u64),
        // SAFETY: the caller's contract.
        None => unsafe { real::seekdir(d, pos) },
    }
}

pub unsafe fn dirfd(d: *mut DIR) -> c_int {
    match ours(d) {
        Some(sd) => sd.fd,
        // SAFETY: the caller's contract.
        None => unsafe { real::dirfd(d) },
    }
}
