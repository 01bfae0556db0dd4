//! The mount's count of closed descriptors, which every client reads
//! with one load (design.md §17.9, "Which file a descriptor is"). The
//! kernel sends FUSE_FLUSH for every close of a descriptor of a file on
//! the mount — by `close`, `dup2` over it, `close_range`, an exec's
//! close-on-exec, glibc's own `fclose`, or a raw system call — and waits
//! for the daemon's answer before the close returns. The daemon advances
//! this counter before it answers, so a client that read the counter,
//! then found descriptor N to be a file it leases, and reads the same
//! value again later knows that no descriptor on the mount was closed
//! meanwhile: N is still that open file, and no statx need ask again.
//!
//! The counter is a sealed memfd's first word, handed to each client
//! over the lease socket after the welcome (`SCM_RIGHTS`); a client can
//! map it read-only only. It starts at the daemon's start time in
//! nanoseconds, so a client's remembered value never matches a later
//! daemon's counter by accident.

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use amber_pmem::SharedCounter;
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};

/// The daemon's counter: the FUSE adapter calls `closed` on every
/// FUSE_FLUSH, before it answers.
#[derive(Clone)]
pub struct Closes(Arc<SharedCounter>);

impl Closes {
    /// A new counter, at the current time in nanoseconds (never 0: a
    /// client takes 0 for "no counter").
    pub(crate) fn new() -> io::Result<Closes> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX >> 1));
        Ok(Closes(Arc::new(SharedCounter::new(now.max(1))?)))
    }

    /// A descriptor of a file on the mount was closed.
    pub fn closed(&self) {
        self.0.advance();
    }

    /// Hands the counter's memfd to the client at the other end of `conn`.
    pub(crate) fn send(&self, conn: &UnixStream) -> io::Result<()> {
        let fd = self.0.descriptor();
        let fds = [fd.ok_or_else(|| io::Error::other("a reader's counter"))?];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
            return Err(io::Error::other("no room for a descriptor"));
        }
        rustix::net::sendmsg(
            conn,
            &[IoSlice::new(b"c")],
            &mut control,
            SendFlags::empty(),
        )?;
        Ok(())
    }
}

/// The daemon's counter, received on `conn` right after the welcome and
/// mapped read-only.
pub(crate) fn receive(conn: &UnixStream) -> io::Result<SharedCounter> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut byte = [0u8; 1];
    let got = rustix::net::recvmsg(
        conn,
        &mut [IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    // Every descriptor received is taken (and closed when dropped); the
    // first is the counter.
    let mut fds = control.drain().filter_map(|m| match m {
        RecvAncillaryMessage::ScmRights(fds) => Some(fds),
        _ => None,
    });
    let fd = fds.next().and_then(|mut f| f.next());
    match (got.bytes, fd) {
        (1, Some(fd)) if byte == *b"c" => SharedCounter::reader(fd),
        _ => Err(io::Error::other("the daemon sent no close counter")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A client sees every close the daemon counts after the handover.
    #[test]
    fn a_client_reads_the_daemons_count() {
        let (daemon, client) = UnixStream::pair().unwrap();
        let closes = Closes::new().unwrap();
        closes.send(&daemon).unwrap();
        let seen = receive(&client).unwrap();
        let first = seen.load();
        assert_ne!(first, 0);
        closes.closed();
        closes.closed();
        assert_eq!(seen.load(), first + 2);
    }

    /// A byte without a descriptor is an error, not a counter.
    #[test]
    fn a_byte_without_a_descriptor_is_refused() {
        let (mut daemon, client) = UnixStream::pair().unwrap();
        daemon.write_all(b"c").unwrap();
        assert!(receive(&client).is_err());
    }
}
