//! Who serves what in this process. Read once from the environment
//! (AMBERFS_POOL, AMBERFS_MOUNT, AMBERFS_OPTIONS, AMBERFS_EMULATE); the
//! pool is opened lazily, at the first call on a path under the mount
//! directory, so a process that never touches it never holds it. Where
//! this process cannot serve the mount directory — the pool is busy (a
//! FUSE daemon or another process holds its lock) or failed to open, or
//! this is a forked child, which never uses its parent's mapping — its
//! calls under the directory go to the kernel if a FUSE mount is up
//! there, and otherwise fail saying why, so no file lands in a kernel
//! directory the pool never sees. A forked child's inherited descriptors
//! fail; the shared mappings it inherited keep showing the pool's pages,
//! which stay pinned for it. At exit the pool is unmounted cleanly;
//! before an exec it is synced.

use std::cell::Cell;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

use crate::posix::errno::tell_once;
use crate::posix::gate::Pass;
use crate::posix::{Errno, PResult, Pool};

use super::real;

pub struct Config {
    /// The mount directory, absolute, without a trailing slash.
    pub mount: Vec<u8>,
    /// The pool to open where no `amberfs mount` is up at `mount`; with
    /// one up, the daemon names its pool to each client, so none is
    /// needed.
    pool: Option<PathBuf>,
    options: String,
    emulate: String,
}

static CONFIG: OnceLock<Option<Config>> = OnceLock::new();
/// The pool once this process owns it; null before, and for good if it
/// was busy.
static POOL: AtomicPtr<Pool> = AtomicPtr::new(std::ptr::null_mut());
static DECIDED: OnceLock<()> = OnceLock::new();
/// Set in a forked child: nothing of the parent's pool may be used.
static FORKED: AtomicBool = AtomicBool::new(false);
static UMASK: AtomicU32 = AtomicU32::new(0o022);
static FORK_TOLD: AtomicBool = AtomicBool::new(false);
/// Why the pool did not open (its errno; 0 while it did, or was not
/// tried), and whether a call under the mount was told so.
static OPEN_FAILED: AtomicI32 = AtomicI32::new(0);
/// `OPEN_FAILED` where the environment names no pool (no errno): every
/// call under the mount then fails with ENOENT while no `amberfs mount`
/// is up.
const NO_POOL: i32 = -1;
static UNSERVED_TOLD: AtomicBool = AtomicBool::new(false);
/// Until when (CLOCK_MONOTONIC_COARSE, ns) a FUSE mount seen at the mount
/// directory is taken to be there without asking again (`fuse_mounted`).
static MOUNT_SEEN_UNTIL: AtomicU64 = AtomicU64::new(0);

/// How long a FUSE mount seen at the mount directory is trusted: statfs
/// of a FUSE path is a round trip to its daemon (FUSE_STATFS), which,
/// asked before every call the kernel then served, cost git 1.6x its time
/// on the plain mount; a mount that goes away is noticed within this.
const MOUNT_TRUSTED_NS: u64 = 1_000_000_000;

/// `statfs`'s type of a FUSE mount.
const FUSE_SUPER_MAGIC: libc::c_long = 0x6573_5546;

thread_local! {
    /// Set while this thread runs Amber's code: calls the library itself
    /// makes (std opening /proc, the pool's own mapping) go to the kernel.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// Marks this thread inside the library until dropped.
pub struct Inside(());

impl Inside {
    /// None if this thread is already inside (a call the library made).
    pub fn enter() -> Option<Inside> {
        if INSIDE.with(|i| i.replace(true)) {
            return None;
        }
        Some(Inside(()))
    }
}

/// Whether this thread runs Amber's own code now.
pub fn inside() -> bool {
    INSIDE.with(Cell::get)
}

impl Drop for Inside {
    fn drop(&mut self) {
        INSIDE.with(|i| i.set(false));
    }
}

/// The configuration, if the environment names a mount (and, for a
/// process that opens the pool itself, the pool).
#[inline]
pub fn config() -> Option<&'static Config> {
    CONFIG.get_or_init(read_config).as_ref()
}

fn read_config() -> Option<Config> {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    let (pool, mount) = (var("AMBERFS_POOL"), var("AMBERFS_MOUNT")?);
    let mut mount = OsString::into_vec(mount);
    while mount.len() > 1 && mount.ends_with(b"/") {
        mount.pop();
    }
    if !mount.starts_with(b"/") {
        eprintln!("amberfs: AMBERFS_MOUNT must be an absolute path; serving nothing");
        return None;
    }
    let text = |name| {
        var(name)
            .map(|v| v.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    Some(Config {
        mount,
        pool: pool.map(PathBuf::from),
        options: text("AMBERFS_OPTIONS"),
        emulate: text("AMBERFS_EMULATE"),
    })
}

/// The pool, if this process owns it (and is not a forked child).
pub fn owned() -> Option<&'static Pool> {
    let p = POOL.load(Ordering::Acquire);
    if p.is_null() || FORKED.load(Ordering::Relaxed) {
        return None;
    }
    // SAFETY: POOL only ever holds a leaked Box<Pool>, never freed.
    Some(unsafe { &*p })
}

/// The pool, opening it on first use; None if it is busy or failed
/// (then `unserved` says what a call under the mount does).
pub fn own(cfg: &Config) -> Option<&'static Pool> {
    if FORKED.load(Ordering::Relaxed) {
        return None;
    }
    DECIDED.get_or_init(|| {
        if fuse_mounted(&cfg.mount) {
            // A FUSE mount there is the pool's daemon, which holds it:
            // the kernel serves this process (`unserved`), and trying the
            // pool first cost every short-lived process of a shell over
            // the mount its options, its CPUs and its memory read from
            // /proc before the lock said no.
            OPEN_FAILED.store(libc::EBUSY, Ordering::Relaxed);
            return;
        }
        let Some(path) = &cfg.pool else {
            OPEN_FAILED.store(NO_POOL, Ordering::Relaxed);
            return;
        };
        let _inside = Inside::enter();
        match Pool::open(path, &cfg.options, &cfg.emulate) {
            Ok(pool) => {
                POOL.store(Box::into_raw(Box::new(pool)), Ordering::Release);
                register_handlers();
            }
            Err(e) => {
                OPEN_FAILED.store(e.errno.0, Ordering::Relaxed);
                if e.errno != Errno(libc::EBUSY) {
                    eprintln!("amberfs: {}", e.message);
                }
            }
        }
    });
    owned()
}

/// A call under the mount directory that this process cannot serve (see
/// `own`): `Ok` when a FUSE mount is up there, so the kernel serves it;
/// otherwise the error it fails with, said once: EBUSY where another
/// process holds the pool (a forked child's parent, or the process that
/// exec'd this one), else the error the pool failed to open with.
pub fn unserved(cfg: &Config) -> PResult<()> {
    if fuse_mounted(&cfg.mount) {
        return Ok(());
    }
    let failed = OPEN_FAILED.load(Ordering::Relaxed);
    let (errno, why) = if FORKED.load(Ordering::Relaxed) {
        (
            libc::EBUSY,
            "this is a forked child of the process that holds the pool",
        )
    } else if failed == libc::EBUSY {
        (libc::EBUSY, "another process holds the pool")
    } else if failed == NO_POOL {
        (libc::ENOENT, "AMBERFS_POOL names no pool to open")
    } else {
        let errno = if failed == 0 { libc::EIO } else { failed };
        (errno, "the pool did not open")
    };
    let mount = String::from_utf8_lossy(&cfg.mount);
    let error = std::io::Error::from_raw_os_error(errno);
    tell_once(
        &UNSERVED_TOLD,
        &format!("{mount} is not served in this process: {why}, and no `amberfs mount` is up there; every call under it fails ({error}) rather than reach the kernel's directory (share a pool between processes through `amberfs mount`)"),
    );
    Err(Errno(errno))
}

/// Whether a FUSE file system is mounted at `dir` (an `amberfs mount` of
/// the pool, whose daemon then serves every process); once seen, it is
/// taken to be there for `MOUNT_TRUSTED_NS`.
fn fuse_mounted(dir: &[u8]) -> bool {
    let now = coarse_now_ns();
    if now < MOUNT_SEEN_UNTIL.load(Ordering::Relaxed) {
        return true;
    }
    let mounted = fuse_at(dir);
    if mounted {
        MOUNT_SEEN_UNTIL.store(now + MOUNT_TRUSTED_NS, Ordering::Relaxed);
    }
    mounted
}

/// CLOCK_MONOTONIC_COARSE in ns: a read of the vDSO's page, no syscall.
pub fn coarse_now_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a timespec we own for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &raw mut t) };
    (t.tv_sec as u64).saturating_mul(1_000_000_000) + t.tv_nsec as u64
}

/// Whether a FUSE file system is mounted at `dir` (`fuse_mount_id`).
fn fuse_at(dir: &[u8]) -> bool {
    std::ffi::CString::new(dir).is_ok_and(|path| fuse_mount_id(&path).is_some())
}

/// The id of the FUSE mount whose root is `dir` (as `mount_id_of` gives
/// a descriptor's), if there is one. Asked of statx and statmount (Linux
/// 6.8) where the kernel has them: statfs of a FUSE path is a round trip
/// to its daemon (FUSE_STATFS, 22-24 µs here against 2 µs for the pair),
/// which every short process of a shell script over the mount paid once,
/// and its daemon served on the same two cores.
pub fn fuse_mount_id(path: &std::ffi::CStr) -> Option<u64> {
    let sx = with_mount_id(statx_raw(
        libc::AT_FDCWD,
        path,
        MOUNT_IDS,
        libc::AT_STATX_DONT_SYNC,
    ))?;
    let root = libc::STATX_ATTR_MOUNT_ROOT as u64;
    if sx.stx_attributes_mask & root != 0 && sx.stx_attributes & root == 0 {
        return None;
    }
    if sx.stx_mask & STATX_MNT_ID_UNIQUE != 0 {
        if let Some(fuse) = statmount_is_fuse(sx.stx_mnt_id) {
            return fuse.then_some(sx.stx_mnt_id);
        }
    }
    // SAFETY: an all-zero statfs is valid; the call writes into it.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statfs we own.
    let r = unsafe { libc::syscall(libc::SYS_statfs, path.as_ptr(), &raw mut st) };
    (r == 0 && st.f_type == FUSE_SUPER_MAGIC).then_some(sx.stx_mnt_id)
}

/// The id of the mount descriptor `fd` is on: the 64-bit one where the
/// kernel has it (Linux 6.8), else the old one, as `fuse_mount_id` gives.
pub fn mount_id_of(fd: libc::c_int) -> Option<u64> {
    identity_of(fd).map(|sx| sx.stx_mnt_id)
}

/// What a leased call asks of the kernel about descriptor `fd`, from its
/// cache (no FUSE request): its type, inode, size, and the id of its
/// mount as `mount_id_of` gives it — in one statx on every kernel (it
/// answers the 64-bit id if asked for both kinds and it has it).
pub(super) fn identity_of(fd: libc::c_int) -> Option<libc::statx> {
    const BASIC: u32 = libc::STATX_TYPE | libc::STATX_INO | libc::STATX_SIZE;
    let sx = statx_raw(fd, c"", BASIC | MOUNT_IDS, libc::AT_STATX_DONT_SYNC);
    with_mount_id(sx).filter(|sx| sx.stx_mask & BASIC == BASIC)
}

/// Both kinds of mount id statx gives.
const MOUNT_IDS: u32 = libc::STATX_MNT_ID | STATX_MNT_ID_UNIQUE;

/// `sx` if it carries a mount id of either kind.
fn with_mount_id(sx: Option<libc::statx>) -> Option<libc::statx> {
    sx.filter(|sx| sx.stx_mask & MOUNT_IDS != 0)
}

/// statx's request for the mount's 64-bit id (Linux 6.8), which
/// statmount takes.
const STATX_MNT_ID_UNIQUE: u32 = 0x4000;
/// statmount(2)'s number on x86_64 and aarch64 alike.
const SYS_STATMOUNT: libc::c_long = 457;
/// statmount's request for the superblock's basics (its magic).
const STATMOUNT_SB_BASIC: u64 = 1;

/// statmount's request (`struct mnt_id_req`, version 0).
#[repr(C)]
struct MntIdReq {
    size: u32,
    spare: u32,
    mnt_id: u64,
    param: u64,
}

/// The head of statmount's answer (`struct statmount`), the rest of its
/// 4 KiB buffer unread.
#[repr(C)]
struct StatmountHead {
    size: u32,
    mnt_opts: u32,
    mask: u64,
    sb_dev_major: u32,
    sb_dev_minor: u32,
    sb_magic: u64,
    rest: [u64; 508],
}

const _: () = assert!(std::mem::offset_of!(StatmountHead, sb_magic) == 24);
const _: () = assert!(std::mem::size_of::<MntIdReq>() == 24);

/// Whether mount `mnt_id` (statx's 64-bit id) is FUSE's, from statmount
/// without asking the file system; None where the kernel cannot say
/// (before 6.8).
fn statmount_is_fuse(mnt_id: u64) -> Option<bool> {
    let req = MntIdReq {
        size: 24,
        spare: 0,
        mnt_id,
        param: STATMOUNT_SB_BASIC,
    };
    // SAFETY: an all-zero answer is valid; the call writes into it.
    let mut sm: StatmountHead = unsafe { std::mem::zeroed() };
    let len = std::mem::size_of::<StatmountHead>();
    // SAFETY: a request and an answer buffer of `len` bytes we own.
    let r = unsafe { libc::syscall(SYS_STATMOUNT, &raw const req, &raw mut sm, len, 0) };
    (r == 0 && sm.mask & STATMOUNT_SB_BASIC != 0).then_some(sm.sb_magic == FUSE_SUPER_MAGIC as u64)
}

/// statx of `path` from `dirfd` (of `dirfd` itself for an empty path)
/// with the kernel's cached attributes (`AT_STATX_DONT_SYNC`: on FUSE, no
/// request to the daemon); None unless it answered every field of `mask`.
pub(super) fn statx_cached(
    dirfd: libc::c_int,
    path: &std::ffi::CStr,
    mask: u32,
) -> Option<libc::statx> {
    statx_raw(dirfd, path, mask, libc::AT_STATX_DONT_SYNC).filter(|st| st.stx_mask & mask == mask)
}

/// `statx_cached`, but with attributes the kernel asks its file system
/// for now (`AT_STATX_FORCE_SYNC`), which it then caches: its size for
/// a file's mappings is then the daemon's.
pub(super) fn statx_synced(
    dirfd: libc::c_int,
    path: &std::ffi::CStr,
    mask: u32,
) -> Option<libc::statx> {
    statx_raw(dirfd, path, mask, libc::AT_STATX_FORCE_SYNC).filter(|st| st.stx_mask & mask == mask)
}

/// statx with `sync` among its flags; whatever fields it answered.
fn statx_raw(
    dirfd: libc::c_int,
    path: &std::ffi::CStr,
    mask: u32,
    sync: libc::c_int,
) -> Option<libc::statx> {
    let empty = if path.is_empty() {
        libc::AT_EMPTY_PATH
    } else {
        0
    };
    let flags = empty | sync;
    // SAFETY: an all-zero statx is valid; the call writes into it.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statx we own.
    let r = unsafe {
        libc::syscall(
            libc::SYS_statx,
            dirfd,
            path.as_ptr(),
            flags,
            mask,
            &raw mut st,
        )
    };
    (r == 0).then_some(st)
}

/// A served descriptor's pool and a pass through its gate; None for a
/// kernel descriptor. In a forked child an inherited served descriptor
/// fails with EBADF.
#[inline]
pub fn served_fd(fd: i32) -> Option<PResult<(&'static Pool, Pass<'static>, Option<Inside>)>> {
    let p = POOL.load(Ordering::Acquire);
    if p.is_null() {
        return None;
    }
    // SAFETY: POOL only ever holds a leaked Box<Pool>, never freed.
    let pool: &'static Pool = unsafe { &*p };
    if !pool.files.is_served(fd) {
        return None;
    }
    if FORKED.load(Ordering::Relaxed) {
        tell_once(&FORK_TOLD, "a descriptor of a served file was used after fork: the child cannot use its parent's pool (EBADF)");
        return Some(Err(Errno(libc::EBADF)));
    }
    Some(pool.enter().map(|pass| (pool, pass, Inside::enter())))
}

/// Whether `fd` is a served descriptor (of this process or, after fork,
/// its parent's).
pub fn is_served(fd: i32) -> bool {
    pool_any().is_some_and(|p| p.files.is_served(fd))
}

/// Whether this is a forked child of the pool's owner.
pub fn forked() -> bool {
    FORKED.load(Ordering::Relaxed)
}

/// The raw pool pointer, for a forked child forgetting inherited
/// descriptors.
pub fn pool_any() -> Option<&'static Pool> {
    let p = POOL.load(Ordering::Acquire);
    // SAFETY: POOL only ever holds a leaked Box<Pool>, never freed.
    (!p.is_null()).then(|| unsafe { &*p })
}

pub fn umask() -> u32 {
    UMASK.load(Ordering::Relaxed)
}

pub fn set_umask(m: u32) {
    UMASK.store(m & 0o777, Ordering::Relaxed);
}

/// At exit: what the program left in its served FILEs is written (exit
/// flushes every stream, but glibc does it only after this handler), then
/// the pool is unmounted.
extern "C" fn at_exit() {
    if owned().is_some() {
        super::hooks::flush_served_streams();
    }
    unmount();
}

fn unmount() {
    if let Some(pool) = owned() {
        let _inside = Inside::enter();
        if let Err(Errno(e)) = pool.close() {
            if e != libc::EBADF {
                eprintln!("amberfs: unmounting the pool at exit failed (errno {e}); the next open recovers it");
            }
        }
    }
}

extern "C" fn in_child() {
    FORKED.store(true, Ordering::Relaxed);
}

/// Before a fork: the child inherits every shared mapping of a pool
/// file, so their blocks stay pinned for it after this process unmaps
/// them (design.md §16.4).
extern "C" fn before_fork() {
    if let Some(pool) = owned() {
        if pool.core().has_mappings() {
            let _inside = Inside::enter();
            pool.core().note_fork();
        }
    }
}

/// Makes everything written durable: before an exec replaces the
/// process (the pool's descriptor closes without an unmount, and the
/// connection to a mount's daemon ends: its write and map leases go back
/// first, `Client::before_exec`).
pub fn sync_before_exec() {
    if let Some(c) = super::lessee::connected() {
        c.before_exec();
    }
    if let Some(pool) = owned() {
        let _inside = Inside::enter();
        if let Err(e) = pool.core().sync_all() {
            eprintln!("amberfs: syncing the pool before exec failed: {e}");
        }
    }
}

/// Unmounts now, as at exit: for _exit, which skips atexit handlers
/// (and, as POSIX says, leaves stdio's buffers unwritten).
pub fn exit_now() {
    unmount();
}

fn register_handlers() {
    // SAFETY: reading the umask means setting it; set it straight back.
    let m = unsafe { real::umask(0o022) };
    // SAFETY: as above.
    unsafe { real::umask(m) };
    set_umask(m);
    // SAFETY: registering plain extern "C" functions with no arguments.
    unsafe {
        libc::atexit(at_exit);
        libc::pthread_atfork(Some(before_fork), None, Some(in_child));
    }
}
