//! What both C-facing layers (the library's `amberfs_*` calls and the
//! interposer's hooks) do with C's arguments and results: errno, C
//! strings, buffers and iovec arrays turned into slices.

use std::ffi::{c_char, c_int, c_void, CStr};

use crate::posix::{Errno, PResult};

/// Most iovecs one vectored call takes (IOV_MAX).
const IOV_MAX: c_int = 1024;

/// Sets the calling thread's errno.
pub fn set_errno(e: i32) {
    // SAFETY: __errno_location returns the calling thread's errno slot,
    // valid for the thread's life.
    unsafe { *libc::__errno_location() = e };
}

/// The value of a call: its result, or `fail` with errno set.
pub fn ret<T>(r: PResult<T>, fail: T) -> T {
    r.unwrap_or_else(|Errno(e)| {
        set_errno(e);
        fail
    })
}

/// Lowest address a user pointer may have: the first page is never
/// mapped (`vm.mmap_min_addr` is at least 4096).
const USER_LOW: usize = 4096;

/// Past the highest address user space has on x86-64 Linux, with five
/// page-table levels (2^56 less a guard page; 2^47 with four): from here
/// up an address is the kernel's or not canonical.
const USER_HIGH: usize = (1 << 56) - 4096;

/// Whether `p` cannot point into this process's memory: NULL, the first
/// page, or outside user space (`usize::MAX`, a sign-extended -1). Such a
/// pointer goes to the kernel untouched, which fails the call with
/// EFAULT as libc's own wrapper would; reading it here would crash the
/// caller instead (pjdfstest's EFAULT cases). A wild pointer inside user
/// space that maps nothing still faults when read, as in any libc
/// function that reads a string.
#[inline]
pub fn outside_user_space<T>(p: *const T) -> bool {
    let a = p as usize;
    !(USER_LOW..USER_HIGH).contains(&a)
}

/// The bytes of C string `s`; EFAULT for a pointer that cannot be the
/// process's (`outside_user_space`), without reading it.
///
/// # Safety
/// `s` is such a pointer or a NUL-terminated string that outlives the call.
#[inline]
pub unsafe fn bytes<'a>(s: *const c_char) -> PResult<&'a [u8]> {
    if outside_user_space(s) {
        return Err(Errno(libc::EFAULT));
    }
    // SAFETY: non-null and NUL-terminated by the caller's contract.
    Ok(unsafe { CStr::from_ptr(s) }.to_bytes())
}

/// `len` bytes at `p` to read from.
///
/// # Safety
/// `p` is NULL or valid for reads of `len` bytes for the call.
pub unsafe fn buf<'a>(p: *const c_void, len: usize) -> PResult<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if outside_user_space(p) {
        return Err(Errno(libc::EFAULT));
    }
    // SAFETY: the caller's contract; len > 0 and p non-null.
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
}

/// `len` bytes at `p` to write into.
///
/// # Safety
/// `p` is NULL or valid for writes of `len` bytes for the call, and not
/// read or written by anyone else meanwhile.
pub unsafe fn buf_mut<'a>(p: *mut c_void, len: usize) -> PResult<&'a mut [u8]> {
    if len == 0 {
        return Ok(&mut []);
    }
    if outside_user_space(p) {
        return Err(Errno(libc::EFAULT));
    }
    // SAFETY: the caller's contract; len > 0 and p non-null.
    Ok(unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), len) })
}

/// The iovec array `iov[..cnt]`.
///
/// # Safety
/// `iov` is valid for reads of `cnt` iovecs for the call.
pub unsafe fn iovecs<'a>(iov: *const libc::iovec, cnt: c_int) -> PResult<&'a [libc::iovec]> {
    if !(0..=IOV_MAX).contains(&cnt) {
        return Err(Errno(libc::EINVAL));
    }
    if cnt == 0 {
        return Ok(&[]);
    }
    if outside_user_space(iov) {
        return Err(Errno(libc::EFAULT));
    }
    // SAFETY: the caller's contract; cnt in 1..=IOV_MAX.
    Ok(unsafe { std::slice::from_raw_parts(iov, cnt as usize) })
}

/// The buffers an iovec array names, to write from.
///
/// # Safety
/// Each iovec names memory valid for reads for the call.
pub unsafe fn gather<'a>(iov: &[libc::iovec]) -> PResult<Vec<&'a [u8]>> {
    // SAFETY: the caller's contract, per iovec.
    iov.iter()
        .map(|v| unsafe { buf(v.iov_base, v.iov_len) })
        .collect()
}

/// The buffers an iovec array names, to read into.
///
/// # Safety
/// Each iovec names memory valid for writes for the call, none
/// overlapping another.
pub unsafe fn scatter<'a>(iov: &[libc::iovec]) -> PResult<Vec<&'a mut [u8]>> {
    // SAFETY: the caller's contract, per iovec.
    iov.iter()
        .map(|v| unsafe { buf_mut(v.iov_base, v.iov_len) })
        .collect()
}
