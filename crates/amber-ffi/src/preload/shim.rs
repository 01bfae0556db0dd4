//! `libamberfs_preload.so`, the library a program preloads: a shim that
//! passes every call to libc until the process has a reason to load the
//! interposer itself, `libamberfs_served.so` (design.md §17.12).
//!
//! Why: every program of a shell script, a make or a git run loads what
//! it preloads, and the interposer is a 3 MB library with the whole file
//! system in it (3,700 relocations, 22 more page faults for `/bin/true`,
//! 40 more for a `cat` whose calls run its hooks): 114-238 µs an exec
//! here, against 78-82 for the shim (BENCHMARKS.md, "A shim in front of
//! the interposer"). With a mount up, a process that never reads or
//! writes much on it has nothing to gain from the interposer, so it pays
//! only for the shim.
//!
//! When the served library is loaded:
//! * at the first call, where the environment names a pool and a mount
//!   directory and no FUSE mount is up there: this process serves the
//!   pool itself, or fails calls under the directory saying why; either
//!   way it needs the interposer before any call reaches the kernel;
//! * with a mount up, when one descriptor's `DATA_CALLS_BEFORE_LOOK`th
//!   read or write finds the descriptor on that mount (one statx): the
//!   interposer's leases may pay from here (they need more calls still,
//!   `lessee`);
//! * with a mount up, when a call after `MOUNT_TRUSTED_NS` finds the
//!   mount gone or replaced (looked at every `CALLS_BETWEEN_CLOCKS`th
//!   call): the interposer then decides, as it would have, what a call
//!   under the directory does.
//!
//! The code every call runs is in one section (`.text.amberfs_shim`), so
//! a process faults in a page or two of it, not one per hook.
//!
//! Never, where the environment names no pool or mount. Until loaded,
//! every call is libc's; after, every call is the served library's hook.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering};

use super::state;
use super::table::{Hooks, NextSymbol, LAYOUT};

/// Reads and writes of one descriptor before the shim asks whether it is
/// on the mount: most programs of a shell script read or write a file in
/// a few calls, for which the interposer could do nothing (a descriptor
/// asks for a lease after four kernel reads, and a process connects after
/// 32), and the one statx this costs is spared them.
const DATA_CALLS_BEFORE_LOOK: u8 = 8;
/// A descriptor looked at and found elsewhere: its calls are not counted.
const ELSEWHERE: u8 = u8::MAX;
/// Descriptors counted apart; higher ones share their counters (`& MASK`),
/// which only makes a look come sooner or later.
const COUNTED: usize = 1024;
const MASK: usize = COUNTED - 1;
/// How long a mount seen at the directory is taken to be there (as the
/// interposer's `state::fuse_mounted` does).
const MOUNT_TRUSTED_NS: u64 = 1_000_000_000;
/// How long a thread waits for another's first call to decide
/// (`wait_decided`): loading the served library takes ~0.3 ms.
const DECIDING_WAIT_NS: u64 = 1_000_000_000;
/// The served library's file name, looked for beside the shim.
const SERVED: &str = "libamberfs_served.so";

/// Other calls between two looks at the clock (`noted`): a short process
/// never reads it, so never faults the vDSO's data page in.
const CALLS_BETWEEN_CLOCKS: u32 = 64;

/// Everything the shim writes, on one page: a forked child (a shell forks
/// for every command) copies one page of it, not one per static.
#[repr(C, align(4096))]
struct Shim {
    /// Per descriptor: data calls counted, or `ELSEWHERE`.
    counts: [AtomicU8; COUNTED],
    /// The served library's table once loaded, else null.
    hooks: AtomicPtr<Hooks>,
    /// `Mode` as a byte.
    mode: AtomicU8,
    /// The thread deciding (`pthread_self`), while `Mode::Deciding`.
    decider: AtomicU64,
    /// Other calls since the process began (`CALLS_BETWEEN_CLOCKS`).
    other_calls: AtomicU32,
    /// The mount's id as statx gives it (`state::fuse_mount_id`), while
    /// `Mode::Lazy`.
    mount_id: AtomicU64,
    /// Until when (CLOCK_MONOTONIC_COARSE, ns) the mount is taken to be
    /// there.
    trusted_until: AtomicU64,
}

const _: () = assert!(std::mem::size_of::<Shim>() == 4096);

static SHIM: Shim = Shim {
    counts: [const { AtomicU8::new(0) }; COUNTED],
    hooks: AtomicPtr::new(std::ptr::null_mut()),
    mode: AtomicU8::new(Mode::Undecided as u8),
    decider: AtomicU64::new(0),
    other_calls: AtomicU32::new(0),
    mount_id: AtomicU64::new(0),
    trusted_until: AtomicU64::new(0),
};

#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Mode {
    Undecided = 0,
    /// The process's first call is deciding (and maybe loading the
    /// served library with no mount up): the deciding thread's own calls
    /// pass to libc, other threads wait (`wait_decided`).
    Deciding,
    /// A thread is loading the served library with a mount up: calls pass
    /// to libc, and the kernel serves them.
    Loading,
    /// No pool or mount named: nothing is ever served.
    Off,
    /// A mount is up: calls pass until one gives a reason to load.
    Lazy,
    /// Loaded; or failed to load with a mount up (said once), so calls
    /// pass to the kernel, which serves the mount.
    Done,
}

/// What a call is to the shim.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// A read or write of the descriptor in its first argument.
    Data,
    /// Closes the descriptor in its first argument.
    Close,
    /// Makes the descriptor in its second argument another's copy.
    Dup,
    /// Closes a range of descriptors.
    CloseMany,
    /// Maps the descriptor in its fifth argument (`mmap`): a shared
    /// mapping of a file on the mount is a reason to load, so it can show
    /// the pool's pages (design.md §17.14).
    Map,
    /// Anything else.
    Other,
}

impl Call {
    /// The call libc's function `name` is.
    pub const fn of(name: &str) -> Call {
        const DATA: [&str; 19] = [
            "read",
            "write",
            "pread",
            "pread64",
            "pwrite",
            "pwrite64",
            "readv",
            "writev",
            "preadv",
            "preadv64",
            "pwritev",
            "pwritev64",
            "preadv2",
            "preadv64v2",
            "pwritev2",
            "pwritev64v2",
            "__read_chk",
            "__pread_chk",
            "__pread64_chk",
        ];
        let mut i = 0;
        while i < DATA.len() {
            if eq(DATA[i], name) {
                return Call::Data;
            }
            i += 1;
        }
        if eq(name, "close") {
            Call::Close
        } else if eq(name, "dup2") || eq(name, "dup3") {
            Call::Dup
        } else if eq(name, "close_range") || eq(name, "closefrom") {
            Call::CloseMany
        } else if eq(name, "mmap") || eq(name, "mmap64") {
            Call::Map
        } else {
            Call::Other
        }
    }
}

const fn eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// An argument that may be a descriptor: only a C `int` is.
pub trait Arg {
    fn fd(&self) -> Option<c_int> {
        None
    }
}

impl Arg for c_int {
    fn fd(&self) -> Option<c_int> {
        Some(*self)
    }
}
impl Arg for u32 {}
impl Arg for u64 {}
impl Arg for i64 {}
impl Arg for usize {}
impl<T> Arg for *const T {}
impl<T> Arg for *mut T {}

/// A call's arguments: its first two descriptors' places.
pub trait Args {
    fn fds(&self) -> (Option<c_int>, Option<c_int>);

    /// mmap's descriptor, for a shared mapping: the fifth argument when
    /// the fourth (the flags) asks for one.
    fn shared_map_fd(&self) -> Option<c_int> {
        None
    }
}

impl<A: Arg> Args for (A,) {
    fn fds(&self) -> (Option<c_int>, Option<c_int>) {
        (self.0.fd(), None)
    }
}

macro_rules! args {
    ($($rest:ident),*) => {
        impl<A: Arg, B: Arg $(, $rest)*> Args for (A, B $(, $rest)*) {
            fn fds(&self) -> (Option<c_int>, Option<c_int>) {
                (self.0.fd(), self.1.fd())
            }
        }
    };
}

args!();
args!(C);
args!(C, D);
args!(C, D, E);

impl<A: Arg, B: Arg, C, D: Arg, E: Arg, F> Args for (A, B, C, D, E, F) {
    fn fds(&self) -> (Option<c_int>, Option<c_int>) {
        (self.0.fd(), self.1.fd())
    }

    fn shared_map_fd(&self) -> Option<c_int> {
        let kind = self.3.fd()? & libc::MAP_TYPE;
        let shared = kind == libc::MAP_SHARED || kind == libc::MAP_SHARED_VALIDATE;
        self.4.fd().filter(|_| shared)
    }
}

/// The arguments of `call` that may be descriptors, as `served` takes
/// them: the first two, or a shared mapping's descriptor.
#[inline]
pub fn fds<T: Args>(call: Call, args: &T) -> (Option<c_int>, Option<c_int>) {
    if call == Call::Map {
        (args.shared_map_fd(), None)
    } else {
        args.fds()
    }
}

/// The served library's hooks, if this call goes to them (loading them
/// first if the call gives the reason); None: libc's function serves it.
#[inline]
pub fn served(call: Call, fds: (Option<c_int>, Option<c_int>)) -> Option<&'static Hooks> {
    let h = SHIM.hooks.load(Ordering::Acquire);
    if !h.is_null() {
        // SAFETY: HOOKS only ever holds the served library's static table,
        // and a loaded library is never unloaded.
        return Some(unsafe { &*h });
    }
    match mode() {
        Mode::Off | Mode::Loading | Mode::Done => None,
        Mode::Undecided => decide(call, fds),
        Mode::Deciding => wait_decided(call, fds),
        Mode::Lazy => noted(call, fds),
    }
}

#[link_section = ".text.amberfs_shim"]
fn mode() -> Mode {
    match SHIM.mode.load(Ordering::Acquire) {
        0 => Mode::Undecided,
        1 => Mode::Deciding,
        2 => Mode::Loading,
        3 => Mode::Off,
        4 => Mode::Lazy,
        _ => Mode::Done,
    }
}

/// At the process's first call: whether to serve nothing, to wait for a
/// reason, or to load the served library now.
#[cold]
fn decide(call: Call, fds: (Option<c_int>, Option<c_int>)) -> Option<&'static Hooks> {
    if SHIM
        .mode
        .compare_exchange(0, Mode::Deciding as u8, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return wait_decided(call, fds);
    }
    // Before this thread makes any call a hook sees.
    // SAFETY: pthread_self has no preconditions.
    SHIM.decider
        .store(unsafe { libc::pthread_self() } as u64, Ordering::Relaxed);
    let Some(mount) = named_mount() else {
        SHIM.mode.store(Mode::Off as u8, Ordering::Release);
        return None;
    };
    if let Some(id) = state::fuse_mount_id(mount) {
        SHIM.mount_id.store(id, Ordering::Relaxed);
        SHIM.trusted_until
            .store(state::coarse_now_ns() + MOUNT_TRUSTED_NS, Ordering::Relaxed);
        SHIM.mode.store(Mode::Lazy as u8, Ordering::Release);
        return None;
    }
    load(true)
}

/// Another thread's call while the first decides: with no mount up this
/// process is about to serve the pool, and a call passed to libc now could
/// reach the kernel's directory, so it waits (yielding) until the decision
/// is made and goes where it says; the deciding thread's own calls (inside
/// dlopen) pass. Bounded (`DECIDING_WAIT_NS`): a thread that holds what the
/// decider waits for (the dynamic loader's lock, in a library's
/// constructor) must not wait for ever.
#[cold]
fn wait_decided(call: Call, fds: (Option<c_int>, Option<c_int>)) -> Option<&'static Hooks> {
    // SAFETY: pthread_self has no preconditions.
    if SHIM.decider.load(Ordering::Relaxed) == unsafe { libc::pthread_self() } as u64 {
        return None;
    }
    let deadline = state::coarse_now_ns() + DECIDING_WAIT_NS;
    while mode() == Mode::Deciding {
        if state::coarse_now_ns() > deadline {
            return None;
        }
        // SAFETY: sched_yield has no preconditions.
        unsafe { libc::sched_yield() };
    }
    served(call, fds)
}

/// The mount directory, where the environment names one (as the
/// interposer's `state::config` requires), without allocating.
fn named_mount() -> Option<&'static CStr> {
    let var = |name: &CStr| {
        // SAFETY: getenv of a NUL-terminated name; the environment's
        // strings outlive the process's use of them here.
        let v = unsafe { libc::getenv(name.as_ptr()) };
        // SAFETY: getenv returns NULL or a NUL-terminated string.
        (!v.is_null()).then(|| unsafe { CStr::from_ptr(v) })
    };
    var(c"AMBERFS_MOUNT").filter(|m| !m.is_empty())
}

/// With a mount up: counts what this call says, and loads the served
/// library if it gives the reason.
#[link_section = ".text.amberfs_shim"]
fn noted(call: Call, (fd0, fd1): (Option<c_int>, Option<c_int>)) -> Option<&'static Hooks> {
    match call {
        Call::Data => {
            let fd = fd0?;
            let slot = &SHIM.counts[fd as usize & MASK];
            let n = slot.load(Ordering::Relaxed);
            if n == ELSEWHERE {
                return None;
            }
            if n + 1 < DATA_CALLS_BEFORE_LOOK {
                slot.store(n + 1, Ordering::Relaxed);
                return None;
            }
            if on_mount(fd) {
                return load(false);
            }
            slot.store(ELSEWHERE, Ordering::Relaxed);
        }
        Call::Map => {
            if fd0.is_some_and(|fd| fd >= 0 && on_mount(fd)) {
                return load(false);
            }
        }
        Call::Close => forget(fd0),
        Call::Dup => forget(fd1),
        Call::CloseMany => SHIM
            .counts
            .iter()
            .for_each(|c| c.store(0, Ordering::Relaxed)),
        Call::Other => {
            // Not a locked add: threads racing here lose a count, which
            // only moves the next look.
            let n = SHIM.other_calls.load(Ordering::Relaxed);
            SHIM.other_calls.store(n.wrapping_add(1), Ordering::Relaxed);
            if n % CALLS_BETWEEN_CLOCKS == CALLS_BETWEEN_CLOCKS - 1
                && state::coarse_now_ns() >= SHIM.trusted_until.load(Ordering::Relaxed)
            {
                return recheck();
            }
        }
    }
    None
}

#[link_section = ".text.amberfs_shim"]
fn forget(fd: Option<c_int>) {
    if let Some(fd) = fd.filter(|&fd| fd >= 0) {
        SHIM.counts[fd as usize & MASK].store(0, Ordering::Relaxed);
    }
}

/// Whether descriptor `fd` is a file on the mount.
fn on_mount(fd: c_int) -> bool {
    state::mount_id_of(fd).is_some_and(|id| id == SHIM.mount_id.load(Ordering::Relaxed))
}

/// The mount seen at the directory is no longer trusted: still the same
/// one, or the served library decides from here.
#[cold]
fn recheck() -> Option<&'static Hooks> {
    let id = named_mount().and_then(state::fuse_mount_id);
    if id == Some(SHIM.mount_id.load(Ordering::Relaxed)) {
        SHIM.trusted_until
            .store(state::coarse_now_ns() + MOUNT_TRUSTED_NS, Ordering::Relaxed);
        return None;
    }
    load(false)
}

/// Loads the served library and hands its table to every later call.
/// Where it cannot: with a mount up (`lazy`), calls go on to the kernel,
/// which serves the mount, said once; with none, this process would have
/// to serve the pool, and rather than let a call reach the kernel's
/// directory it ends, saying why.
#[cold]
fn load(eager: bool) -> Option<&'static Hooks> {
    // Eager: `decide` holds `Mode::Deciding` already. Lazy: one thread
    // loads.
    if !eager
        && SHIM
            .mode
            .compare_exchange(
                Mode::Lazy as u8,
                Mode::Loading as u8,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
    {
        return None;
    }
    let loaded = open_served();
    if let Ok(hooks) = loaded {
        // The table before the mode: a thread waiting out `Deciding` that
        // sees `Done` must find it.
        SHIM.hooks
            .store(std::ptr::from_ref(hooks).cast_mut(), Ordering::Release);
    }
    SHIM.mode.store(Mode::Done as u8, Ordering::Release);
    match loaded {
        Ok(hooks) => Some(hooks),
        Err(why) => {
            let msg = format!("amberfs: cannot load {SERVED}: {why}\n");
            // SAFETY: write(2) to stderr of a buffer we own.
            unsafe { libc::syscall(libc::SYS_write, 2, msg.as_ptr(), msg.len()) };
            if eager {
                // SAFETY: ending the process, which holds nothing yet.
                unsafe { libc::abort() };
            }
            None
        }
    }
}

/// dlopen of the served library beside this one, and its table.
fn open_served() -> Result<&'static Hooks, String> {
    let path = served_path()?;
    // SAFETY: dlopen of a NUL-terminated path; RTLD_LOCAL keeps the served
    // library's symbols out of the program's search order.
    let lib = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if lib.is_null() {
        return Err(dl_error());
    }
    // SAFETY: dlsym of a NUL-terminated name in a handle dlopen gave.
    let f = unsafe { libc::dlsym(lib, c"amberfs_served_hooks".as_ptr()) };
    if f.is_null() {
        return Err(dl_error());
    }
    // SAFETY: the served library defines this name with this signature
    // (`export_served!`).
    let f: extern "C" fn(NextSymbol) -> &'static Hooks = unsafe { std::mem::transmute(f) };
    let hooks = f(next_symbol);
    if hooks.layout != LAYOUT {
        return Err("it was built from another version of Amber".to_owned());
    }
    Ok(hooks)
}

/// The served library's path: beside the shim's own file.
fn served_path() -> Result<std::ffi::CString, String> {
    // SAFETY: an all-zero Dl_info is valid; dladdr fills it.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let me = next_symbol as *const c_void;
    // SAFETY: dladdr of an address in this library, into a Dl_info we own.
    if unsafe { libc::dladdr(me, &raw mut info) } == 0 || info.dli_fname.is_null() {
        return Err("the shim cannot find its own file".to_owned());
    }
    // SAFETY: dladdr's file name is NUL-terminated and lives as long as
    // the library.
    let own = unsafe { CStr::from_ptr(info.dli_fname) }.to_bytes();
    let dir = own
        .iter()
        .rposition(|&c| c == b'/')
        .map_or(&b"."[..], |i| &own[..i]);
    let mut path = dir.to_vec();
    path.push(b'/');
    path.extend_from_slice(SERVED.as_bytes());
    std::ffi::CString::new(path).map_err(|_| "a NUL in the shim's path".to_owned())
}

fn dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated message.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        return "unknown dlopen error".to_owned();
    }
    // SAFETY: as above.
    unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
}

/// libc's function `name` (NUL-terminated), found from the shim's place
/// in the search order: the served library's way to libc (`real`).
extern "C" fn next_symbol(name: *const c_char) -> *mut c_void {
    // SAFETY: dlsym with RTLD_NEXT of the served library's NUL-terminated
    // name; RTLD_NEXT is relative to this function's library, the shim.
    unsafe { libc::dlsym(libc::RTLD_NEXT, name) }
}
