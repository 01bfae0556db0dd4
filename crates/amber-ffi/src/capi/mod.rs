//! The C ABI of libamberfs: `amberfs_*` functions on an opaque pool
//! handle, shaped like the POSIX calls they are named after. A call that
//! fails returns -1 (NULL for handles) and sets errno. Descriptors are
//! real kernel descriptor numbers reserved for the pool's files (see
//! `posix::reserve`), so passing one to a kernel call fails cleanly.
//! Every call is thread-safe; `include/amberfs.h` documents each.

mod dir;
mod io;
mod map;
mod paths;
mod xattr;

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use amber_core::Fs;
use amber_format::{FormatParams, PoolLayout};
use amber_pmem::{MapOptions, MmapDevice};

use crate::abi::{bytes, ret};
use crate::posix::pool::OpenError;
use crate::posix::{Errno, PResult, Pool};

pub use dir::*;
pub use io::*;
pub use map::*;
pub use paths::*;
pub use xattr::*;

/// A mounted pool (opaque to C).
#[allow(non_camel_case_types)]
pub struct amberfs {
    pool: Pool,
    /// Directory streams still open: unmount waits for none.
    dirs: AtomicUsize,
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn remember(e: &OpenError) {
    let text = CString::new(e.message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|l| *l.borrow_mut() = text);
}

/// The pool `fs` points at.
///
/// # Safety
/// `fs` is NULL or a handle from `amberfs_mount` not yet unmounted.
pub(crate) unsafe fn pool<'a>(fs: *const amberfs) -> PResult<&'a amberfs> {
    // SAFETY: the caller passes NULL or a live handle.
    unsafe { fs.as_ref() }.ok_or(Errno(libc::EINVAL))
}

/// An optional C string as text ("" for NULL).
///
/// # Safety
/// As `bytes`.
unsafe fn text<'a>(s: *const c_char) -> PResult<&'a str> {
    if s.is_null() {
        return Ok("");
    }
    // SAFETY: forwarded contract.
    let b = unsafe { bytes(s) }?;
    std::str::from_utf8(b).map_err(|_| Errno(libc::EINVAL))
}

fn path_of(b: &[u8]) -> &Path {
    use std::os::unix::ffi::OsStrExt;
    Path::new(std::ffi::OsStr::from_bytes(b))
}

/// Creates a pool file of `size` bytes at `path` and formats it (as
/// `amberfs mkfs`). `layout` is "split" (the default, for policy amber),
/// "classic", "lfs" or "nova"; NULL means the default. Fails with EEXIST if the
/// file exists.
///
/// # Safety
/// `path` is a NUL-terminated string; `layout` is NULL or one.
#[no_mangle]
pub unsafe extern "C" fn amberfs_mkfs(
    path: *const c_char,
    size: u64,
    layout: *const c_char,
) -> c_int {
    // SAFETY: the caller's contract.
    let args = unsafe { bytes(path).and_then(|p| Ok((p, text(layout)?))) };
    let made = args.and_then(|(p, layout)| {
        let layout = match layout {
            "" | "split" => PoolLayout::Split,
            "classic" => PoolLayout::Classic,
            "lfs" => PoolLayout::Lfs,
            "nova" => PoolLayout::Nova,
            _ => return Err(Errno(libc::EINVAL)),
        };
        mkfs(path_of(p), size, layout).map_err(|e| {
            remember(&e);
            e.errno
        })
    });
    ret(made.map(|()| 0), -1)
}

fn mkfs(path: &Path, size: u64, layout: PoolLayout) -> Result<(), OpenError> {
    let fail = |errno: i32, what: String| OpenError {
        errno: Errno(errno),
        message: format!("cannot make pool {}: {what}", path.display()),
    };
    let dev = MmapDevice::create(path, size, &MapOptions::default()).map_err(|e| {
        let exists = path.exists();
        fail(
            if exists { libc::EEXIST } else { libc::EINVAL },
            e.to_string(),
        )
    })?;
    let params = FormatParams {
        layout,
        ..FormatParams::for_size(size)
    };
    Fs::format(&dev, &params).map_err(|e| {
        let _ = std::fs::remove_file(path);
        fail(libc::EINVAL, e.to_string())
    })
}

/// Opens and mounts the pool at `path`, recovering it if its last user
/// crashed. `options` are `amberfs mount -o` options ("policy=amber",
/// "sync", ...; NULL or "" for the defaults); `emulate` is an emulator
/// preset or spec as `--emulate` takes ("dram", "pcm", ...; NULL for no
/// added cost). Returns NULL with errno set on failure: EBUSY when
/// another process (a FUSE mount, a preloaded program) has the pool,
/// ENOENT when there is none, EINVAL for bad options;
/// `amberfs_last_error` then says more.
///
/// # Safety
/// `path` is a NUL-terminated string; `options` and `emulate` are NULL or
/// NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn amberfs_mount(
    path: *const c_char,
    options: *const c_char,
    emulate: *const c_char,
) -> *mut amberfs {
    // SAFETY: the caller's contract.
    let args = unsafe { bytes(path).and_then(|p| Ok((p, text(options)?, text(emulate)?))) };
    let opened = args.and_then(|(p, o, e)| {
        Pool::open(path_of(p), o, e).map_err(|err| {
            remember(&err);
            err.errno
        })
    });
    let handle = opened.map(|pool| {
        Box::into_raw(Box::new(amberfs {
            pool,
            dirs: AtomicUsize::new(0),
        }))
    });
    ret(handle, std::ptr::null_mut())
}

/// Unmounts cleanly (the next mount needs no recovery) and frees the
/// handle. Descriptors still open are closed first; fails with EBUSY,
/// changing nothing, while a directory stream is open.
///
/// # Safety
/// `fs` is a handle from `amberfs_mount`, not used again after success.
#[no_mangle]
pub unsafe extern "C" fn amberfs_unmount(fs: *mut amberfs) -> c_int {
    // SAFETY: the caller's contract.
    let r = unsafe { pool(fs) }.and_then(|h| {
        if h.dirs.load(Ordering::SeqCst) > 0 {
            return Err(Errno(libc::EBUSY));
        }
        h.pool.close()
    });
    if r.is_ok() {
        // SAFETY: `fs` came from Box::into_raw in amberfs_mount and the
        // caller gives it up now.
        drop(unsafe { Box::from_raw(fs) });
    }
    ret(r.map(|()| 0), -1)
}

/// A description of the last failed `amberfs_mount` or `amberfs_mkfs`
/// in this thread ("" if none); valid until the thread's next such call.
#[no_mangle]
pub extern "C" fn amberfs_last_error() -> *const c_char {
    LAST_ERROR.with(|l| l.borrow().as_ptr())
}
