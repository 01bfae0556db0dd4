//! A counter in a page of DRAM that one process (the mount's daemon)
//! advances and others (its lease clients) read with one load: a sealed
//! memfd, handed over a socket, that a reader can only map read-only.
//! It is not persistent memory and nothing in it is ever flushed; it
//! lives here because mapping it is `unsafe`, and this crate holds the
//! workspace's mappings.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

/// The memfd's size: one page, of which the counter is the first word.
const LEN: usize = 4096;

/// One shared counter, mapped: the owner's (writable) or a reader's.
pub struct SharedCounter {
    word: NonNull<u8>,
    /// The memfd, kept by the owner to hand to readers; None for a reader.
    fd: Option<OwnedFd>,
}

// SAFETY: the mapping is only reached through atomic operations on its
// first word, and it lives until the value is dropped.
unsafe impl Send for SharedCounter {}
// SAFETY: as above.
unsafe impl Sync for SharedCounter {}

impl SharedCounter {
    /// A new counter at `start`, its memfd sealed so that no one can
    /// resize it or map it writable again: a reader's mapping is
    /// read-only whatever it asks.
    pub fn new(start: u64) -> io::Result<SharedCounter> {
        let flags = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
        // SAFETY: a NUL-terminated name; the result is checked.
        let raw = unsafe { libc::memfd_create(c"amberfs-closes".as_ptr(), flags) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor just made and owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: ftruncate of a descriptor we own.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), LEN as libc::off_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let word = map(fd.as_fd(), libc::PROT_READ | libc::PROT_WRITE)?;
        let mut counter = SharedCounter { word, fd: None };
        counter.atomic().store(start, Ordering::Release);
        let seals =
            libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_FUTURE_WRITE | libc::F_SEAL_SEAL;
        // SAFETY: fcntl(F_ADD_SEALS) takes no pointer.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
            return Err(io::Error::last_os_error());
        }
        counter.fd = Some(fd);
        Ok(counter)
    }

    /// A reader's view of the counter whose memfd is `fd` (which it
    /// closes: the mapping outlives it). Refuses a descriptor of fewer
    /// than a page of bytes, whose mapping could fault.
    pub fn reader(fd: OwnedFd) -> io::Result<SharedCounter> {
        let len = std::fs::File::from(fd.try_clone()?).metadata()?.len();
        if len < LEN as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the shared counter is shorter than a page",
            ));
        }
        let word = map(fd.as_fd(), libc::PROT_READ)?;
        Ok(SharedCounter { word, fd: None })
    }

    /// The owner's memfd, to hand to a reader; None for a reader.
    pub fn descriptor(&self) -> Option<BorrowedFd<'_>> {
        self.fd.as_ref().map(AsFd::as_fd)
    }

    /// The counter's value.
    pub fn load(&self) -> u64 {
        self.atomic().load(Ordering::Acquire)
    }

    /// Advances the counter by one; only its owner may.
    pub fn advance(&self) {
        assert!(self.fd.is_some(), "a reader's counter is read-only");
        self.atomic().fetch_add(1, Ordering::AcqRel);
    }

    fn atomic(&self) -> &AtomicU64 {
        // SAFETY: the page is mapped, page-aligned (so the word is
        // 8-byte aligned) and reached only atomically, by every process
        // that maps it, for as long as `self` lives.
        unsafe { AtomicU64::from_ptr(self.word.as_ptr().cast()) }
    }
}

impl Drop for SharedCounter {
    fn drop(&mut self) {
        // SAFETY: our own mapping of LEN bytes, which nothing reaches
        // after this.
        unsafe { libc::munmap(self.word.as_ptr().cast(), LEN) };
    }
}

/// Maps the first page of `fd` shared, with protection `prot`.
fn map(fd: BorrowedFd<'_>, prot: libc::c_int) -> io::Result<NonNull<u8>> {
    // SAFETY: without MAP_FIXED the kernel replaces no existing mapping;
    // the result is checked below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            LEN,
            prot,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader sees every advance of the owner, and can neither map the
    /// memfd writable nor resize it.
    #[test]
    fn a_reader_sees_advances_and_cannot_write() {
        let owner = SharedCounter::new(41).unwrap();
        let fd = owner.descriptor().unwrap().try_clone_to_owned().unwrap();
        let writable = map(fd.as_fd(), libc::PROT_READ | libc::PROT_WRITE);
        assert!(writable.is_err(), "a sealed memfd maps writable");
        // SAFETY: ftruncate of a descriptor we own.
        let grown = unsafe { libc::ftruncate(fd.as_raw_fd(), 2 * LEN as libc::off_t) };
        assert_ne!(grown, 0, "a sealed memfd grows");
        let reader = SharedCounter::reader(fd).unwrap();
        assert_eq!(reader.load(), 41);
        owner.advance();
        assert_eq!(reader.load(), 42);
        assert!(reader.descriptor().is_none());
    }

    /// A descriptor of anything shorter than a page is refused.
    #[test]
    fn a_short_file_is_refused() {
        let f = tempfile::tempfile().unwrap();
        f.set_len(8).unwrap();
        assert!(SharedCounter::reader(OwnedFd::from(f)).is_err());
    }
}
