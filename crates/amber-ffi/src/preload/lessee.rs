//! A preloaded process as a client of the mount's daemon (design.md
//! §17.3): a regular file it has open on the FUSE mount and reads again
//! and again is read from its own mapping of the pool under a read lease,
//! with no FUSE round trip (and one it overwrites again and again is
//! written under a write lease: `lessee_write`). Everything else about the descriptor stays the
//! kernel's (it was opened through the kernel, so permissions, `dup2`,
//! inheritance and locks are as on any mount); the file offset is the
//! kernel's too, moved with lseek after a read.
//!
//! Only a regular file on the mount at `AMBERFS_MOUNT`, open for reading,
//! is read here. The kernel says what a descriptor is (`statx` without a
//! round trip, and `F_GETFL`); once it has, the answer stands for as long
//! as the mount's count of closes (`Client::closes`) has not moved: the
//! daemon counts every close of a descriptor on the mount, by whatever
//! path (glibc closes a FILE's descriptor without calling `close`), before
//! the close returns, so a descriptor number reused behind the hooks'
//! backs is asked about again and never read as another file. A
//! per-descriptor hint spares the statx for descriptors that are not on
//! the mount.
//!
//! A descriptor asks for a lease only after four kernel reads, and only
//! for a read below the end of file; the process connects at its first
//! such ask, and only once it has read files on the mount through the
//! kernel 32 times: a process that reads a few files whole (most commands
//! of a shell script, `cp`, a compiler reading its source, `git add`)
//! pays nothing for any of it.

use std::ffi::{c_int, CString};
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use amber_lease::{Client, Held, CONTROL_XATTR};
use parking_lot::Mutex;

use super::state::{self, Inside};

/// Descriptors with a hint; reads of higher ones are the kernel's.
const HINTED: usize = 4096;
/// A descriptor not yet looked at.
const UNKNOWN: u32 = 0;
/// A descriptor on another file system, or not a readable regular file.
const ELSEWHERE: u32 = 1;
/// A descriptor whose file the daemon refused lately: its reads go to the
/// kernel, without a statx, until `Slot::cool_until_ms` (the file is being
/// changed by another process, or cannot be leased).
const COOLING: u32 = 2;
/// A descriptor of a regular file on the mount: this plus the reads the
/// kernel served it since it was last leased.
const ON_MOUNT: u32 = 3;
/// Kernel reads of a descriptor before its file is leased: a file read in
/// a few calls (most are, by programs that read a file whole) would pay
/// the ask's round trip for nothing. A read at or past the end of file
/// never asks.
const READS_BEFORE_LEASE: u32 = 4;
/// A descriptor's kernel reads are counted up to this.
const MAX_COUNTED_READS: u32 = 1 << 20;
/// Kernel reads of files on the mount before this process connects: a
/// connection (the socket, the pool's mapping, a thread) cost 0.6-0.9 ms
/// of a short process here, some 32 FUSE reads, so a process connects
/// once it has spent that much on reads (a ski rental: never more than
/// twice the better choice's cost). With 4, a shell script of short
/// commands ran at 0.81x the plain mount.
const READS_BEFORE_CONNECT: u32 = 32;

/// Which calls a hint is about: a descriptor may be leased for reads and
/// not for writes (open read-only), and the other way.
#[derive(Clone, Copy)]
pub(super) enum Dir {
    Read = 0,
    Write = 1,
}

/// What the hooks know of one descriptor, per direction (`Dir`). One
/// 64-byte slot per descriptor, so a short process's few descriptors
/// touch one page of these, not one per table (each a page fault).
#[repr(align(64))]
struct Slot {
    /// `UNKNOWN`, `ELSEWHERE`, `COOLING`, or `ON_MOUNT` plus the kernel
    /// calls since the last lease.
    hint: [AtomicU32; 2],
    /// For a `COOLING` descriptor: until when (CLOCK_MONOTONIC_COARSE, ms).
    cool_until_ms: [AtomicU32; 2],
    /// The inode the kernel last found the descriptor to be, open right
    /// for the direction (`on_mount`), with `APPENDS` set if it was open
    /// with `O_APPEND`; 0 if none.
    known: [AtomicU64; 2],
    /// The `stamp` read before that finding (0: none): while the stamp
    /// still reads so, the descriptor is that open file (`identity`).
    checked_at: [AtomicU64; 2],
    /// Even, or odd while a thread writes `known` and `checked_at`: a
    /// reader that finds it odd or moved does not trust what it read.
    seq: AtomicU64,
}

const _: () = assert!(std::mem::size_of::<Slot>() == 64);

static SLOTS: [Slot; HINTED] = [const {
    Slot {
        hint: [const { AtomicU32::new(UNKNOWN) }; 2],
        cool_until_ms: [const { AtomicU32::new(0) }; 2],
        known: [const { AtomicU64::new(0) }; 2],
        checked_at: [const { AtomicU64::new(0) }; 2],
        seq: AtomicU64::new(0),
    }
}; HINTED];
/// Counts the hooks' changes of any descriptor (`forget`), which a
/// `stamp` adds to the mount's count of closes: a descriptor opened,
/// duplicated onto, or given other flags (`fcntl(F_SETFL)`) through the
/// hooks is asked about again.
static DESCRIPTORS_CHANGED: AtomicU64 = AtomicU64::new(0);
/// `Slot::known`'s mark of a descriptor open with `O_APPEND` (inode
/// numbers never reach bit 63).
const APPENDS: u64 = 1 << 63;
/// Held by a leased `read` from taking the descriptor's offset to moving
/// it, so two threads reading one descriptor read different bytes, as
/// the kernel's own lock on a file's position makes them. (Two processes
/// sharing the description after fork are not serialized.)
static POSITIONS: [Mutex<()>; HINTED] = [const { parking_lot::const_mutex(()) }; HINTED];
/// The connection, once made: a leaked `Arc<Client>`, never freed (a
/// forked child forgets its parent's).
static CLIENT: AtomicPtr<Client> = AtomicPtr::new(std::ptr::null_mut());
/// Whether this process tried to connect (once: a refusal is final).
static TRIED: AtomicBool = AtomicBool::new(false);
/// Reads and writes of files on the mount the kernel served.
static MOUNT_CALLS: AtomicU32 = AtomicU32::new(0);
/// The mount's id (statx's stx_mnt_id); 0 until looked up, u64::MAX if
/// nothing is mounted there.
static MOUNT_ID: AtomicU64 = AtomicU64::new(0);
/// The connection's descriptors (its socket's two and the pool file's),
/// which a forked child closes.
static SOCKETS: [AtomicI32; 3] = [const { AtomicI32::new(-1) }; 3];
static ATFORK: std::sync::Once = std::sync::Once::new();

/// Calls on kernel descriptor `fd` in direction `dir`, if they may be
/// leased (a regular file on the mount, open so): a look at its hint and
/// the `stamp`, or a statx. The vectored hooks ask it before they gather
/// their buffers, so a socket's or a pipe's `readv`/`writev` builds none,
/// and pass it on (`read_as`, `lessee_write::write_vectored`): at most
/// one statx a call.
pub(super) fn leasable(fd: c_int, dir: Dir) -> Option<Descriptor> {
    state::config()?;
    descriptor(fd, dir)
}

/// Serves a read of kernel descriptor `fd` into `bufs`, at `at` or (None)
/// at the descriptor's offset, which it then moves; None when the kernel
/// must serve it.
pub fn read(fd: c_int, bufs: &mut [&mut [u8]], at: Option<u64>) -> Option<isize> {
    read_as(leasable(fd, Dir::Read)?, fd, bufs, at)
}

/// `read` of descriptor `fd`, which `leasable` found to be `d`.
pub(super) fn read_as(
    d: Descriptor,
    fd: c_int,
    bufs: &mut [&mut [u8]],
    at: Option<u64>,
) -> Option<isize> {
    let (_position, off) = position(fd, d.i, at)?;
    let (c, held) = d.lease(connected(), off)?;
    let n = c.read(&held, off, bufs)?;
    if at.is_none() {
        seek(fd, i64::try_from(off + n as u64).ok()?, libc::SEEK_SET)?;
    }
    isize::try_from(n).ok()
}

/// Where a leased call on descriptor `fd` (hint slot `i`) works: at `at`,
/// or (None) at the kernel's file offset, under the descriptor's position
/// lock, which the caller holds until it has moved the offset.
pub(super) fn position(
    fd: c_int,
    i: usize,
    at: Option<u64>,
) -> Option<(Option<parking_lot::MutexGuard<'static, ()>>, u64)> {
    let guard = at.is_none().then(|| POSITIONS[i].lock());
    let off = match at {
        Some(o) => o,
        None => u64::try_from(seek(fd, 0, libc::SEEK_CUR)?).ok()?,
    };
    Some((guard, off))
}

/// A kernel descriptor of a regular file on the mount, as a leased call
/// in direction `dir` sees it.
pub(super) struct Descriptor {
    fd: c_int,
    pub(super) i: usize,
    pub(super) ino: u64,
    /// Open with `O_APPEND`: every write goes at the end of file.
    pub(super) appends: bool,
    /// The size the kernel reported, if this call asked it (`size`).
    size: Option<u64>,
    hint: u32,
    dir: Dir,
}

/// Descriptor `fd` if calls on it in direction `dir` may be leased: its
/// hint allows it and the kernel says it is a regular file on the mount,
/// open so (`on_mount`). Called only with the interposer configured.
pub(super) fn descriptor(fd: c_int, dir: Dir) -> Option<Descriptor> {
    if state::inside() || never_leasing() {
        return None;
    }
    let i = usize::try_from(fd).ok().filter(|&i| i < HINTED)?;
    let slot = &SLOTS[i].hint[dir as usize];
    let hint = slot.load(Ordering::Relaxed);
    if hint == ELSEWHERE || (hint == COOLING && cooling(i, dir)) {
        return None;
    }
    let Some((ino, size, appends)) = identity(fd, dir, &SLOTS[i]) else {
        slot.store(ELSEWHERE, Ordering::Relaxed);
        return None;
    };
    Some(Descriptor {
        fd,
        i,
        ino,
        appends,
        size,
        hint,
        dir,
    })
}

impl Descriptor {
    /// The file's size as the kernel has it cached: only a guide to
    /// whether to ask for a lease, and where, never what a call does.
    pub(super) fn size(&self) -> u64 {
        self.size
            .or_else(|| state::identity_of(self.fd).map(|s| s.stx_size))
            .unwrap_or(0)
    }

    /// The connection and the lease this call at `off` is served under:
    /// one held on the window (a write lease for `Dir::Write`), or one
    /// asked for now if the call is due (`due`). None: the kernel's call;
    /// a refusal also cools the descriptor down.
    pub(super) fn lease(
        &self,
        client: Option<&'static Client>,
        off: u64,
    ) -> Option<(&'static Client, Arc<Held>)> {
        let write = matches!(self.dir, Dir::Write);
        if write && super::lessee_map::maps_file(self.ino) {
            // Mapped here: the kernel must see every new end of file. A
            // lease taken while the mapping was made goes back.
            if let Some((c, h)) = client.and_then(|c| c.held_write(self.ino).map(|h| (c, h))) {
                c.renew(&h);
            }
            return None;
        }
        let held = client.and_then(|c| c.held(self.ino, off).map(|h| (c, h)));
        if let Some((c, h)) = held.filter(|(_, h)| !write || h.writes()) {
            return Some((c, h));
        }
        let c = self.due(client, off)?;
        let asked = if write {
            c.ask_write(self.ino, off)
        } else {
            c.ask(self.ino, off)
        };
        if asked.is_none() {
            cool(self.i, self.dir, c.backoff_left(self.ino, write));
        }
        Some((c, asked?))
    }

    /// The connection to ask on, if this call (at `off`) is due to ask
    /// for a lease: the descriptor's kernel calls passed
    /// `READS_BEFORE_LEASE`, a read is below the end of file (a write may
    /// be anywhere: appends are leased too), and the process is connected
    /// or now worth connecting. Otherwise counts the kernel's call.
    pub(super) fn due(&self, client: Option<&'static Client>, off: u64) -> Option<&'static Client> {
        let slot = &SLOTS[self.i].hint[self.dir as usize];
        MOUNT_CALLS.fetch_add(1, Ordering::Relaxed);
        let calls = (self.hint.max(ON_MOUNT) - ON_MOUNT + 1).min(MAX_COUNTED_READS);
        let due =
            calls > READS_BEFORE_LEASE && (matches!(self.dir, Dir::Write) || off < self.size());
        let Some(c) = due.then(|| client.or_else(worth_connecting)).flatten() else {
            slot.store(ON_MOUNT + calls, Ordering::Relaxed);
            return None;
        };
        slot.store(ON_MOUNT, Ordering::Relaxed);
        Some(c)
    }
}

/// Descriptor `i`'s file was refused: its calls in direction `dir` skip
/// the lease path for `left` (a descriptor number reused meanwhile only
/// waits as long).
fn cool(i: usize, dir: Dir, left: Option<std::time::Duration>) {
    let Some(left) = left else {
        return;
    };
    // At most a minute: the daemon's cool-downs are a second or so.
    let ms = u32::try_from(left.as_millis().min(60_000)).unwrap_or(60_000);
    let slot = &SLOTS[i];
    slot.cool_until_ms[dir as usize].store(now_ms().wrapping_add(ms), Ordering::Relaxed);
    slot.hint[dir as usize].store(COOLING, Ordering::Relaxed);
}

/// Whether descriptor `i`'s cool-down still runs: compared as a signed
/// distance, so the clock's wrap (every 49 days) changes nothing.
fn cooling(i: usize, dir: Dir) -> bool {
    let left = SLOTS[i].cool_until_ms[dir as usize]
        .load(Ordering::Relaxed)
        .wrapping_sub(now_ms());
    (left as i32) > 0
}

/// CLOCK_MONOTONIC_COARSE in ms, wrapping.
fn now_ms() -> u32 {
    (state::coarse_now_ns() / 1_000_000) as u32
}

/// A descriptor the process no longer has: its hint goes, and no
/// descriptor's identity stands unasked (`stamp`).
pub fn forget(fd: c_int) {
    DESCRIPTORS_CHANGED.fetch_add(1, Ordering::Relaxed);
    let Some(i) = usize::try_from(fd).ok().filter(|&i| i < HINTED) else {
        return;
    };
    let slot = &SLOTS[i];
    for d in 0..2 {
        slot.hint[d].store(UNKNOWN, Ordering::Relaxed);
    }
}

/// The inode of `fd` if it is a regular file on the mount, open for
/// reading (`Dir::Read`) or for writing (`Dir::Write`), its size if the
/// kernel was asked, and whether it is open with `O_APPEND`. No system
/// call while the `stamp` reads as when `slot` last found it so;
/// otherwise asked of the kernel (`on_mount`), and remembered.
fn identity(fd: c_int, dir: Dir, slot: &Slot) -> Option<(u64, Option<u64>, bool)> {
    // Read before the kernel is asked: a change after it moves the stamp.
    let now = stamp();
    if let Some(known) = now.and_then(|n| slot.known_at(dir, n)) {
        return Some((known & !APPENDS, None, known & APPENDS != 0));
    }
    let (ino, size, appends) = on_mount(fd, dir)?;
    if let Some(n) = now {
        slot.remember(dir, ino | if appends { APPENDS } else { 0 }, n);
    }
    Some((ino, Some(size), appends))
}

/// The mount's count of closes (`Client::closes`) plus the hooks' own
/// changes of descriptors; None while this process is not connected.
/// While it reads the same, no descriptor in the process's table changed.
fn stamp() -> Option<u64> {
    let closes = connected()?.closes();
    Some(closes.wrapping_add(DESCRIPTORS_CHANGED.load(Ordering::Relaxed)))
}

impl Slot {
    /// What the slot found the descriptor to be in direction `dir`, if it
    /// found it at stamp `now` (a seqlock read: a pair torn by a writer
    /// is never trusted).
    fn known_at(&self, dir: Dir, now: u64) -> Option<u64> {
        let d = dir as usize;
        let before = self.seq.load(Ordering::Acquire);
        let known = self.known[d].load(Ordering::Relaxed);
        let at = self.checked_at[d].load(Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::Acquire);
        let steady = before & 1 == 0 && self.seq.load(Ordering::Relaxed) == before;
        (steady && known != 0 && at == now).then_some(known)
    }

    /// Remembers `known` as found at stamp `at`, unless another thread is
    /// writing the slot (its finding will do; waiting could hang a
    /// signal handler that interrupted that very thread).
    fn remember(&self, dir: Dir, known: u64, at: u64) {
        let d = dir as usize;
        let s = self.seq.load(Ordering::Relaxed);
        let mine = s & 1 == 0
            && self
                .seq
                .compare_exchange(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok();
        if !mine {
            return;
        }
        std::sync::atomic::fence(Ordering::Release);
        self.known[d].store(known, Ordering::Relaxed);
        self.checked_at[d].store(at, Ordering::Relaxed);
        self.seq.store(s + 2, Ordering::Release);
    }
}

/// The inode and size of `fd` if it is a regular file on the mount, open
/// for reading (`Dir::Read`) or for writing (`Dir::Write`), and whether
/// it is open with `O_APPEND`; asked of the kernel without a FUSE round
/// trip (so the size is the kernel's cached one).
fn on_mount(fd: c_int, dir: Dir) -> Option<(u64, u64, bool)> {
    let st = state::identity_of(fd)?;
    let regular = u32::from(st.stx_mode) & libc::S_IFMT == libc::S_IFREG;
    if !regular || st.stx_mnt_id != mount_id()? || st.stx_ino & APPENDS != 0 {
        return None;
    }
    // SAFETY: fcntl(F_GETFL) takes no pointer.
    let fl = unsafe { libc::syscall(libc::SYS_fcntl, fd, libc::F_GETFL) } as c_int;
    let mode = fl & libc::O_ACCMODE;
    let open = match dir {
        Dir::Read => mode != libc::O_WRONLY,
        Dir::Write => mode != libc::O_RDONLY,
    };
    let right = fl >= 0 && fl & libc::O_PATH == 0 && open;
    right.then_some((st.stx_ino, st.stx_size, fl & libc::O_APPEND != 0))
}

/// The id of the FUSE mount at `AMBERFS_MOUNT`, if one is mounted there,
/// of the kind a descriptor's `identity_of` gives.
fn mount_id() -> Option<u64> {
    let id = match MOUNT_ID.load(Ordering::Relaxed) {
        0 => {
            let cfg = state::config()?;
            let path = CString::new(cfg.mount.clone()).ok()?;
            let id = state::fuse_mount_id(&path).unwrap_or(u64::MAX);
            MOUNT_ID.store(id, Ordering::Relaxed);
            id
        }
        id => id,
    };
    (id != u64::MAX).then_some(id)
}

/// Every basic attribute of `fd` as the kernel has it cached (no FUSE
/// request).
pub(super) fn statx_cached(fd: c_int) -> Option<libc::statx> {
    state::statx_cached(fd, c"", libc::STATX_BASIC_STATS)
}

pub(super) fn seek(fd: c_int, off: i64, whence: c_int) -> Option<i64> {
    // SAFETY: lseek takes no pointer.
    let r = unsafe { libc::syscall(libc::SYS_lseek, fd, off, whence) };
    (r >= 0).then_some(r)
}

/// Whether this process will lease nothing: it tried to connect and was
/// not admitted (not the pool's owner), or its daemon went away. Its
/// reads then skip the lease path's checks (a statx and an `F_GETFL`).
fn never_leasing() -> bool {
    if !TRIED.load(Ordering::Relaxed) {
        return false;
    }
    let p = CLIENT.load(Ordering::Acquire);
    // SAFETY: CLIENT only holds a leaked Arc, never freed.
    p.is_null() || !unsafe { &*p }.alive()
}

/// The connection, if this process made one and the daemon is there.
pub(super) fn connected() -> Option<&'static Client> {
    let p = CLIENT.load(Ordering::Acquire);
    // SAFETY: CLIENT only holds a leaked Arc, never freed.
    (!p.is_null()).then(|| unsafe { &*p }).filter(|c| c.alive())
}

/// The connection, made now if this process never tried: a mapping of a
/// file on the mount is worth one (each page it faults in through the
/// kernel is a FUSE request).
pub(super) fn client_now() -> Option<&'static Client> {
    if CLIENT.load(Ordering::Acquire).is_null() {
        return connect();
    }
    connected()
}

/// Whether descriptor `fd` is open for reading and writing.
pub(super) fn open_for_writing(fd: c_int) -> bool {
    // SAFETY: fcntl(F_GETFL) takes no pointer.
    let fl = unsafe { libc::syscall(libc::SYS_fcntl, fd, libc::F_GETFL) } as c_int;
    fl >= 0 && fl & libc::O_ACCMODE == libc::O_RDWR
}

/// Connects, if this process has read enough on the mount through the
/// kernel for a connection to pay (`READS_BEFORE_CONNECT`) and never
/// connected before.
fn worth_connecting() -> Option<&'static Client> {
    if MOUNT_CALLS.load(Ordering::Relaxed) < READS_BEFORE_CONNECT {
        return None;
    }
    if !CLIENT.load(Ordering::Acquire).is_null() {
        return None;
    }
    connect()
}

#[cold]
fn connect() -> Option<&'static Client> {
    let _inside = Inside::enter()?;
    if TRIED.swap(true, Ordering::AcqRel) {
        return None;
    }
    let socket = control_socket()?;
    let client = Client::connect(&socket, lease_thread_start).ok()?;
    for (slot, fd) in SOCKETS.iter().zip(client.descriptors()) {
        slot.store(fd, Ordering::Relaxed);
    }
    super::lessee_map::tell_mapped(&client);
    let raw = Arc::into_raw(client).cast_mut();
    CLIENT.store(raw, Ordering::Release);
    ATFORK.call_once(|| {
        // SAFETY: registering plain extern "C" functions.
        unsafe { libc::pthread_atfork(Some(super::lessee_map::before_fork), None, Some(in_child)) };
    });
    // SAFETY: just stored, never freed.
    Some(unsafe { &*raw })
}

/// The daemon's lease socket, from the mount root's `user.amberfs.control`.
fn control_socket() -> Option<PathBuf> {
    let cfg = state::config()?;
    let path = CString::new(cfg.mount.clone()).ok()?;
    let name = CString::new(CONTROL_XATTR).ok()?;
    let mut buf = vec![0u8; 4096];
    // SAFETY: NUL-terminated strings and a buffer we own of that length.
    let n = unsafe {
        libc::syscall(
            libc::SYS_getxattr,
            path.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    buf.truncate(usize::try_from(n).ok()?);
    Some(PathBuf::from(std::ffi::OsString::from(
        String::from_utf8(buf).ok()?,
    )))
}

/// Run first by the lease thread: everything it does is the library's
/// own (no hook serves it), and it leaves the program's descriptor table
/// for a copy holding only its socket, `keep` (see `Pool`'s threads).
fn lease_thread_start(keep: &[RawFd]) {
    std::mem::forget(Inside::enter());
    crate::posix::detach_descriptors_but(keep);
}

/// In a forked child: the parent's connection is not the child's. Its
/// descriptors close, and the child connects on its own when it reads.
extern "C" fn in_child() {
    CLIENT.store(std::ptr::null_mut(), Ordering::Release);
    TRIED.store(false, Ordering::Release);
    MOUNT_CALLS.store(0, Ordering::Relaxed);
    for s in &SOCKETS {
        let fd = s.swap(-1, Ordering::Relaxed);
        if fd >= 0 {
            // SAFETY: the child's copy of the connection's descriptor.
            unsafe { libc::syscall(libc::SYS_close, fd) };
        }
    }
}
