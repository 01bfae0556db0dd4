//! A preloaded process's side of the leases (design.md §17.3): one
//! connection to the daemon, its own mapping of the pool, and a thread
//! that answers recalls. A file read under a lease is copied from PM with
//! no round trip, and one written under a write lease is written by own
//! commits into the lease's blocks (`writer`); a recall waits out the
//! reads and writes in flight on that file before it is answered, so once
//! the daemon changes the file no read here sees the old blocks, and once
//! it adopts a write lease no write here lands in its blocks.

use std::collections::HashMap;
use std::io::{self, BufReader};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use amber_core::Run;
use amber_format::Timespec;
use amber_pmem::{
    Emulated, EmulatorSpec, MapOptions, MmapDevice, PersistError, PmDevice, SharedCounter,
};
use parking_lot::{Condvar, Mutex, RwLock};

use crate::closes;
use crate::contention::COOL_DOWN;
use crate::maps::{MapWin, Maps};
use crate::wire::{self, Grant, Msg, Refusal, Welcome, VERSION, WINDOW_BLOCKS};
use crate::writer::{NotMine, Writer};

/// What a leased change gives: the kernel's to make (`NotMine`), or made,
/// with its persist's outcome.
type Made<T> = Result<Result<T, PersistError>, NotMine>;

const BLOCK: u64 = amber_format::BLOCK_SIZE;
/// Most leases this process keeps: a new one beyond it returns another
/// (it holds no file open to say which it still reads; every lease held
/// makes a change of that file wait for a recall).
const MAX_HELD: usize = 256;
/// How long a file being changed is not asked about again.
const BUSY_BACKOFF: Duration = Duration::from_millis(2);
/// Most files remembered as refused (forgetting them only asks sooner).
const MAX_BACKOFF: usize = 1024;

/// A window of a file this process reads under a lease. Its view is
/// `None` once the lease is recalled or the daemon is gone: reads then go
/// to the kernel.
pub struct Held {
    ino: u64,
    window: u64,
    lease: u64,
    /// A write lease.
    write: bool,
    view: RwLock<Option<View>>,
}

impl Held {
    /// Whether this is a write lease.
    pub fn writes(&self) -> bool {
        self.write
    }
}

struct View {
    size: u64,
    runs: Vec<Run>,
    /// A write lease's state (`None`: a read lease).
    writer: Option<Writer>,
}

/// Where a leased write goes (`Client::write`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    /// At this byte.
    Offset(u64),
    /// At the end of file (`O_APPEND`).
    End,
}

/// What a write lease changed of its file (`Client::written`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// The newest write's time (the file's mtime and ctime), if it wrote.
    pub newest: Option<Timespec>,
    /// The file's size now.
    pub size: u64,
    /// Blocks the file maps now, in 4,096-byte units.
    pub blocks: u64,
}

/// The bytes a window spans.
const WINDOW_BYTES: u64 = WINDOW_BLOCKS * BLOCK;

/// The daemon's answer to one request, as the lease thread took it in.
enum Answer {
    /// A read or write lease, held.
    Lease(Arc<Held>),
    /// A map lease, its mapping showing the pool.
    Mapped,
    /// A `Maps` holds.
    Noted,
    Refused(Refusal),
}

/// A file refused lately: not asked about until `until`; if
/// `writes_only`, only for a write lease.
#[derive(Clone, Copy)]
struct Backoff {
    until: Instant,
    writes_only: bool,
}

/// The window holding byte `off`.
fn window_of(off: u64) -> u64 {
    off / WINDOW_BYTES
}

/// The connection to the daemon.
pub struct Client {
    /// The socket's two descriptors and the pool file's (-1: none).
    descriptors: [RawFd; 3],
    writer: Mutex<UnixStream>,
    /// Answers by request: the lease taken in (by the lease thread,
    /// before it reads the next frame), or why not.
    replies: Mutex<HashMap<u64, Answer>>,
    /// Files not to ask about again before the given time: refused lately.
    backoff: Mutex<HashMap<u64, Backoff>>,
    arrived: Condvar,
    /// By (inode, window).
    leases: RwLock<HashMap<(u64, u64), Arc<Held>>>,
    alive: AtomicBool,
    next_seq: AtomicU64,
    dev: Emulated<MmapDevice>,
    /// The pool is mapped writable and no persist failed: write leases
    /// may be asked for.
    writable: AtomicBool,
    /// The mount's count of closed descriptors (`closes`).
    closes: SharedCounter,
    /// Mappings showing the pool under map leases.
    maps: Maps,
}

impl Client {
    /// Connects to the daemon's lease socket, maps the pool it names
    /// (checking it is the daemon's file) and starts the thread that
    /// answers recalls; that thread first runs `on_thread_start` with the
    /// socket's and the pool file's descriptors, which it must keep (it
    /// maps map leases' pages from the pool file).
    pub fn connect(socket: &Path, on_thread_start: fn(&[RawFd])) -> io::Result<Arc<Client>> {
        let conn = UnixStream::connect(socket)?;
        let mut w = conn.try_clone()?;
        wire::send(&mut w, &Msg::Hello { version: VERSION })?;
        // Unbuffered: the lease thread's reader takes over after it.
        let welcome = match wire::recv(&mut &conn)? {
            Some(Msg::Welcome(wl)) if wl.version == VERSION => wl,
            _ => return Err(io::Error::other("the daemon speaks another lease protocol")),
        };
        let closes = closes::receive(&conn)?;
        let (dev, writable) = map_pool(&welcome)?;
        let keep = conn.as_raw_fd();
        let pool_fd = dev.inner().file_descriptor().unwrap_or(-1);
        let client = Arc::new(Client {
            descriptors: [keep, w.as_raw_fd(), pool_fd],
            writer: Mutex::new(w),
            replies: Mutex::new(HashMap::new()),
            backoff: Mutex::new(HashMap::new()),
            arrived: Condvar::new(),
            leases: RwLock::new(HashMap::new()),
            alive: AtomicBool::new(true),
            next_seq: AtomicU64::new(1),
            dev,
            writable: AtomicBool::new(writable),
            closes,
            maps: Maps::default(),
        });
        let c = Arc::clone(&client);
        let (started, start) = std::sync::mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("amberfs-lease".into())
            .stack_size(128 << 10)
            .spawn(move || {
                on_thread_start(&[keep, pool_fd]);
                let _ = started.send(());
                c.listen(&conn);
            })?;
        // Nothing is asked before the thread is ready to answer recalls:
        // its start may close copies of descriptors on the mount, each a
        // FUSE_FLUSH the daemon's threads must serve, and a lease granted
        // meanwhile could be recalled by a change on one of those threads
        // that waits for this thread's answer — every thread then waits
        // for another until the recall's timeout kills this process.
        start
            .recv()
            .map_err(|_| io::Error::other("the lease thread did not start"))?;
        Ok(client)
    }

    /// The connection's descriptors in the process's table (the socket's
    /// two and the pool file's, or -1), which a forked child (that must
    /// neither speak nor write for its parent) closes.
    pub fn descriptors(&self) -> [RawFd; 3] {
        self.descriptors
    }

    /// The mount's count of closed descriptors: while it reads the same,
    /// no descriptor of a file on the mount was closed, by any path
    /// (design.md §17.9).
    pub fn closes(&self) -> u64 {
        self.closes.load()
    }

    /// Whether the daemon is still there.
    pub fn alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// The lease this process holds on the window of `ino` holding byte
    /// `off`, if any.
    pub fn held(&self, ino: u64, off: u64) -> Option<Arc<Held>> {
        self.leases.read().get(&(ino, window_of(off))).cloned()
    }

    /// Asks the daemon for a read lease on the window of `ino` holding
    /// byte `off`; `None` if it refused, or is gone. Waits for the
    /// answer, which the daemon always gives.
    pub fn ask(&self, ino: u64, off: u64) -> Option<Arc<Held>> {
        self.ask_for(ino, off, false)
    }

    /// Asks for a write lease on the window of `ino` holding byte `off`,
    /// after returning this process's read leases on the file (a write
    /// lease excludes them); `None` if refused, gone, or this process may
    /// not write the pool.
    pub fn ask_write(&self, ino: u64, off: u64) -> Option<Arc<Held>> {
        if !self.writable.load(Ordering::Acquire) {
            return None;
        }
        self.return_file(ino);
        self.ask_for(ino, off, true)
    }

    fn ask_for(&self, ino: u64, off: u64, write: bool) -> Option<Arc<Held>> {
        if !self.alive() || self.backing_off(ino, write) {
            return None;
        }
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        let window = window_of(off);
        let ask = Msg::Ask {
            seq,
            ino,
            window,
            write,
        };
        if wire::send(&mut *self.writer.lock(), &ask).is_err() {
            return None;
        }
        match self.reply(seq)? {
            Answer::Lease(h) => {
                Some(h).filter(|h| h.ino == ino && h.window == window && h.writes() == write)
            }
            Answer::Mapped | Answer::Noted => None,
            Answer::Refused(why) => {
                self.back_off(ino, why);
                None
            }
        }
    }

    /// Waits for the answer to request `seq`, which the daemon always
    /// gives; `None` if it went first.
    fn reply(&self, seq: u64) -> Option<Answer> {
        let mut replies = self.replies.lock();
        // Each round waits for one wake-up: a reply, or the daemon's end.
        loop {
            if let Some(m) = replies.remove(&seq) {
                return Some(m);
            }
            if !self.alive() {
                return None;
            }
            self.arrived.wait(&mut replies);
        }
    }

    /// Asks for a map lease on the program's new mapping `win` (design.md
    /// §17.14), one under which the program may store if `writable`: once
    /// granted, its pages for the file's blocks below the end of file are
    /// the pool's own, pinned by the daemon. False if refused (the
    /// mapping stays the kernel's: correct, through the page cache).
    pub fn map(&self, win: MapWin, writable: bool) -> bool {
        let ino = win.ino();
        let may = !writable || self.writable.load(Ordering::Acquire);
        if !self.alive() || !may || self.backing_off(ino, false) {
            win.release();
            return false;
        }
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        let (first, blocks) = win.blocks();
        if let Err(win) = self.maps.ask(seq, win) {
            win.release();
            return false;
        }
        let ask = Msg::MapAsk {
            seq,
            ino,
            first,
            blocks,
            writable,
        };
        let sent = wire::send(&mut *self.writer.lock(), &ask).is_ok();
        let answer = if sent { self.reply(seq) } else { None };
        if let Some(Answer::Mapped) = answer {
            return true;
        }
        if let Some(Answer::Refused(why)) = answer {
            self.back_off(ino, why);
        }
        // Not taken by the lease thread: the mapping is the kernel's still.
        if let Some(win) = self.maps.answered(seq) {
            win.release();
        }
        false
    }

    /// Tells the daemon this process maps `ino` `MAP_SHARED` (or more
    /// files than it tells apart: `wire::ALL_FILES`) until it ends, and
    /// waits until that holds: from then on no process is granted a
    /// write lease on the file (design.md §17.14). False if the daemon is
    /// gone.
    pub fn note_mapping(&self, ino: u64) -> bool {
        if !self.alive() {
            return false;
        }
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        let maps = Msg::Maps { seq, ino };
        if wire::send(&mut *self.writer.lock(), &maps).is_err() {
            return false;
        }
        matches!(self.reply(seq), Some(Answer::Noted))
    }

    /// Whether any mapping of this process shows the pool: the mmap
    /// family's hooks look no further while none does.
    pub fn maps_held(&self) -> bool {
        self.maps.any()
    }

    /// Gives back the map leases of every mapping meeting `[addr, addr +
    /// len)`, or of all of them (`None`): their pages become the
    /// kernel's mapping of the file again first. Before a munmap,
    /// mremap or mprotect of the range, and before a fork, whose child
    /// must not inherit pages nobody pins for it.
    pub fn return_maps(&self, range: Option<(usize, usize)>) {
        for (lease, win) in self.maps.take_range(range) {
            let ino = win.ino();
            win.give_back();
            self.send(&Msg::Return { ino, lease });
        }
    }

    /// Returns every map lease and write lease before an exec: it ends
    /// the connection while the process lives on, which the daemon would
    /// take for a client it cut off, and kill (`server::wait_gone`). The
    /// returns reach the daemon ahead of the connection's end.
    pub fn before_exec(&self) {
        self.return_maps(None);
        let writes: Vec<Arc<Held>> = self
            .leases
            .read()
            .values()
            .filter(|h| h.write)
            .cloned()
            .collect();
        for h in writes {
            self.renew(&h);
        }
    }

    /// The lease thread's part of a map grant: shows the pool in the
    /// mapping request `seq` parked, before the next frame (a recall of
    /// it) is read. A grant this process cannot show goes back.
    fn took_map(&self, conn: &UnixStream, seq: u64, (ino, lease): (u64, u64), runs: &[Run]) {
        let shown = match (self.maps.answered(seq), self.dev.pages()) {
            (Some(win), Some(pages)) if win.ino() == ino => {
                if win.show(pages, runs, self.dev.size()) {
                    self.maps.hold(lease, win);
                    true
                } else {
                    win.give_back();
                    false
                }
            }
            (win, _) => {
                if let Some(win) = win {
                    win.release();
                }
                false
            }
        };
        if !shown {
            self.send_on(conn, &Msg::Return { ino, lease });
        }
        let answer = if shown {
            Answer::Mapped
        } else {
            Answer::Refused(Refusal::Unleasable)
        };
        self.replies.lock().insert(seq, answer);
        self.arrived.notify_all();
    }

    /// How long `ino` is not asked about yet for a lease (a write lease
    /// if `write`): it was refused lately.
    pub fn backoff_left(&self, ino: u64, write: bool) -> Option<Duration> {
        let b = *self.backoff.lock().get(&ino)?;
        let until = (write || !b.writes_only).then_some(b.until)?;
        until.checked_duration_since(Instant::now())
    }

    /// Whether `ino` was refused lately and is not asked about yet for a
    /// lease (a write lease if `write`).
    fn backing_off(&self, ino: u64, write: bool) -> bool {
        let mut b = self.backoff.lock();
        match b.get(&ino) {
            Some(x) if Instant::now() < x.until => write || !x.writes_only,
            Some(_) => {
                b.remove(&ino);
                false
            }
            None => false,
        }
    }

    /// Asks about `ino` again only after a while, by why it was refused:
    /// a change under way ends soon; a contended or unleasable file, or a
    /// full table, stays so for longer; a file another process maps is
    /// still read under leases.
    fn back_off(&self, ino: u64, why: Refusal) {
        let wait = match why {
            Refusal::Busy => BUSY_BACKOFF,
            Refusal::Contended | Refusal::Unleasable | Refusal::Limit | Refusal::Mapped => {
                COOL_DOWN
            }
        };
        let mut b = self.backoff.lock();
        if b.len() >= MAX_BACKOFF {
            b.clear();
        }
        let until = Instant::now() + wait;
        let writes_only = why == Refusal::Mapped;
        b.insert(ino, Backoff { until, writes_only });
    }

    /// Takes a grant in, unless its runs could reach outside the pool or
    /// its window. Run by the lease thread as the grant arrives, so a
    /// recall of it, which the daemon sends only after the grant, always
    /// finds it; what it gives back goes out on `conn`.
    fn hold(&self, conn: &UnixStream, mut g: Grant) -> Option<Arc<Held>> {
        let writer = match g.writes.take() {
            Some(w) => {
                let window = g.window.saturating_mul(WINDOW_BLOCKS)
                    ..(g.window + 1).saturating_mul(WINDOW_BLOCKS);
                Writer::new(g.ino, w, (window, g.size), self.dev.size()).map(Some)
            }
            None => Some(None),
        };
        let Some(writer) = writer.filter(|_| runs_fit(&g, self.dev.size())) else {
            self.send_on(
                conn,
                &Msg::Return {
                    ino: g.ino,
                    lease: g.lease,
                },
            );
            return None;
        };
        let key = (g.ino, g.window);
        let held = Arc::new(Held {
            ino: g.ino,
            window: g.window,
            lease: g.lease,
            write: writer.is_some(),
            view: RwLock::new(Some(View {
                size: g.size,
                runs: g.runs,
                writer,
            })),
        });
        let returned = {
            let mut leases = self.leases.write();
            let mut out: Vec<Arc<Held>> = leases.remove(&key).into_iter().collect();
            if leases.len() >= MAX_HELD {
                let any = leases.keys().next().copied();
                out.extend(any.and_then(|k| leases.remove(&k)));
            }
            leases.insert(key, Arc::clone(&held));
            out
        };
        for old in returned {
            self.retire(&old);
            self.send_on(
                conn,
                &Msg::Return {
                    ino: old.ino,
                    lease: old.lease,
                },
            );
        }
        Some(held)
    }

    /// Sends `msg` from the lease thread, on its own descriptor of the
    /// connection, under the lock every writer takes.
    fn send_on(&self, conn: &UnixStream, msg: &Msg) {
        let _writing = self.writer.lock();
        let _ = wire::send(&mut &*conn, msg);
    }

    /// Reads the leased file at `off` from PM into `bufs` in turn, as
    /// readv does, stopping at the end of file; `None` once the lease is
    /// gone, or if the read would leave the lease's window (the caller
    /// asks the kernel: a read is never cut short at a window's end). The
    /// whole read sees one state of the file: a recall waits for it.
    pub fn read(&self, held: &Held, off: u64, bufs: &mut [&mut [u8]]) -> Option<usize> {
        let view = held.view.read();
        let v = view.as_ref()?;
        let want: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        let end = off.saturating_add(want).min(v.size);
        if window_of(off) != held.window || (end > off && window_of(end - 1) != held.window) {
            return None;
        }
        let mut done = 0u64;
        for buf in bufs.iter_mut() {
            let n = self.copy(v, off.saturating_add(done), buf);
            done += n as u64;
            if n < buf.len() {
                break;
            }
        }
        usize::try_from(done).ok()
    }

    /// Writes `data` at `at` of the file `held` leases for writing
    /// (`Writer::write`): durable and atomic on return. Returns the offset
    /// it wrote at — the end of file for `At::End`, read under the lease's
    /// lock, so appends of threads of this process never overlap, and no
    /// other process can change the file's size while the lease is out.
    /// `Err(Shape)` when it is the kernel's to make (not a write lease,
    /// recalled, not inside the lease's window, or a persist of this
    /// process failed before); `Err(Spent)` when too few of the lease's
    /// blocks are left (`renew` it).
    pub fn write(
        &self,
        held: &Held,
        at: At,
        data: &[u8],
    ) -> Result<Result<u64, PersistError>, NotMine> {
        self.writing(held, |w, runs, dev| {
            let off = match at {
                At::Offset(off) => off,
                At::End => w.size(),
            };
            let done = w.write(dev, runs, off, data, now())?;
            Ok(done.map(|()| off))
        })
    }

    /// Sets the size of the file `held` leases for writing to `len`
    /// (`Writer::truncate`): durable on return. A shrink returns the lease
    /// at once (it ends it). `Err` as for `write`.
    pub fn truncate(&self, held: &Held, len: u64) -> Result<Result<(), PersistError>, NotMine> {
        let done = self.writing(held, |w, runs, dev| w.truncate(dev, runs, len, now()))?;
        if done == Ok(true) {
            self.renew(held);
        }
        Ok(done.map(drop))
    }

    /// Allocates `[off, off + len)` of the file `held` leases for
    /// writing (`Writer::allocate`, with `keep_size` for
    /// `FALLOC_FL_KEEP_SIZE`): durable on return. `Err` as for `write`.
    pub fn allocate(
        &self,
        held: &Held,
        range: (u64, u64),
        keep_size: bool,
    ) -> Result<Result<(), PersistError>, NotMine> {
        self.writing(held, |w, runs, dev| {
            w.allocate(dev, runs, range, keep_size, now())
        })
    }

    /// Runs `op` on the writer of `held` under its lock, with the lease's
    /// runs and this process's mapping, and keeps the view's size in
    /// step. `Err(Shape)` if it is no write lease (any more), or a
    /// persist of this process failed before: no guess at what the pool
    /// holds, the kernel's path (whose recall adopts what is there)
    /// instead. A failed persist now stops this process's writes.
    fn writing<T>(
        &self,
        held: &Held,
        op: impl FnOnce(&mut Writer, &[Run], &Emulated<MmapDevice>) -> Made<T>,
    ) -> Made<T> {
        if !self.writable.load(Ordering::Acquire) {
            return Err(NotMine::Shape);
        }
        let mut view = held.view.write();
        let v = view.as_mut().ok_or(NotMine::Shape)?;
        let w = v.writer.as_mut().ok_or(NotMine::Shape)?;
        let done = op(w, &v.runs, &self.dev)?;
        v.size = w.size();
        if done.is_err() {
            self.writable.store(false, Ordering::Release);
        }
        Ok(done)
    }

    /// The write lease this process holds on `ino`, if any (one at most:
    /// a file has one write lease at a time).
    pub fn held_write(&self, ino: u64) -> Option<Arc<Held>> {
        let leases = self.leases.read();
        leases.values().find(|h| h.ino == ino && h.write).cloned()
    }

    /// Returns `held` (its writes become the file's when the daemon takes
    /// it back, before it answers anything else this process asks).
    pub fn renew(&self, held: &Held) {
        let gone = {
            let mut leases = self.leases.write();
            let key = (held.ino, held.window);
            let ours = leases.get(&key).is_some_and(|h| h.lease == held.lease);
            if ours {
                leases.remove(&key);
            }
            ours
        };
        if gone {
            self.retire(held);
            self.send(&Msg::Return {
                ino: held.ino,
                lease: held.lease,
            });
        }
    }

    /// Returns every lease this process holds on `ino`.
    fn return_file(&self, ino: u64) {
        let mine: Vec<Arc<Held>> = {
            let leases = self.leases.read();
            leases.values().filter(|h| h.ino == ino).cloned().collect()
        };
        for h in mine {
            self.renew(&h);
        }
    }

    /// What this process's write lease on `ino` changed that the kernel's
    /// cached attributes do not know yet. `None`: it holds no write lease
    /// on the file.
    pub fn written(&self, ino: u64) -> Option<Written> {
        let held = self.held_write(ino)?;
        let view = held.view.read();
        let w = view.as_ref()?.writer.as_ref()?;
        Some(Written {
            newest: w.newest(),
            size: w.size(),
            blocks: w.mapped(),
        })
    }

    /// Sends `msg` from a caller's thread, whole, under the writer lock.
    fn send(&self, msg: &Msg) {
        let _ = wire::send(&mut *self.writer.lock(), msg);
    }

    /// Copies what `v` holds at `off` into `buf`, up to the end of file.
    fn copy(&self, v: &View, off: u64, buf: &mut [u8]) -> usize {
        if v.writer.as_ref().is_some_and(Writer::moved_any) {
            return self.copy_blocks(v, off, buf);
        }
        let n = piece_len(v.size.saturating_sub(off), buf.len());
        let mut done = 0;
        // Each round copies a run's part or a hole's zeros, at least one
        // byte: bounded by `n`.
        while done < n {
            let pos = off + done as u64;
            let fb = pos / BLOCK;
            let i = v.runs.partition_point(|r| r.file_block + r.blocks <= fb);
            let piece = match v.runs.get(i) {
                Some(r) if r.file_block <= fb => {
                    let end = (r.file_block + r.blocks) * BLOCK;
                    let take = piece_len(end - pos, n - done);
                    let at = r.pool_off + (pos - r.file_block * BLOCK);
                    self.dev.read(at, &mut buf[done..done + take]);
                    take
                }
                next => {
                    let end = next.map_or(u64::MAX, |r| r.file_block * BLOCK);
                    let take = piece_len(end - pos, n - done);
                    buf[done..done + take].fill(0);
                    take
                }
            };
            done += piece;
        }
        n
    }

    /// `copy` for a window this process rewrote blocks or slices of:
    /// block by block, each from where it lies now, under the slices
    /// written since.
    fn copy_blocks(&self, v: &View, off: u64, buf: &mut [u8]) -> usize {
        let w = v.writer.as_ref().expect("a write lease's view");
        let n = piece_len(v.size.saturating_sub(off), buf.len());
        let mut done = 0;
        // Each round copies the rest of one block: bounded by `n`.
        while done < n {
            let pos = off + done as u64;
            let fb = pos / BLOCK;
            let take = piece_len((fb + 1) * BLOCK - pos, n - done);
            let piece = &mut buf[done..done + take];
            match w.locate(&v.runs, fb) {
                Some(at) => {
                    self.dev.read(at + pos % BLOCK, piece);
                    w.overlay(&self.dev, fb, pos % BLOCK, piece);
                }
                None => piece.fill(0),
            }
            done += take;
        }
        n
    }

    /// Reads frames until the daemon goes: grants and refusals to their
    /// askers, recalls answered once no read of the file is in flight.
    /// Answers go out on `conn` itself, the one descriptor this thread
    /// may keep (`on_thread_start`), under the writer's lock.
    fn listen(&self, conn: &UnixStream) {
        let mut reader = BufReader::new(conn);
        while let Ok(Some(msg)) = wire::recv(&mut reader) {
            match msg {
                Msg::Recall { ino, lease } => self.recalled(conn, ino, lease),
                Msg::Granted(g) => {
                    let seq = g.seq;
                    let held = self.hold(conn, g);
                    let answer = held.map_or(Answer::Refused(Refusal::Unleasable), Answer::Lease);
                    self.replies.lock().insert(seq, answer);
                    self.arrived.notify_all();
                }
                Msg::Mapped {
                    seq,
                    ino,
                    lease,
                    runs,
                } => self.took_map(conn, seq, (ino, lease), &runs),
                Msg::Refused { seq, why, .. } => {
                    self.replies.lock().insert(seq, Answer::Refused(why));
                    self.arrived.notify_all();
                }
                Msg::Noted { seq } => {
                    self.replies.lock().insert(seq, Answer::Noted);
                    self.arrived.notify_all();
                }
                _ => break,
            }
        }
        self.alive.store(false, Ordering::Release);
        let all: Vec<_> = self.leases.write().drain().map(|(_, h)| h).collect();
        for h in all {
            // Waits for the reads and writes in flight on the window.
            *h.view.write() = None;
        }
        // No daemon pins their blocks now: the kernel's mapping, whose
        // faults fail while the mount is dead, rather than the pool's.
        for (_, win) in self.maps.take_range(None) {
            win.give_back();
        }
        // No lease is left and none comes: nothing here stores into the
        // pool again, and a new mount may recover it.
        self.writable.store(false, Ordering::Release);
        self.dev.inner().stop_writing();
        let _replies = self.replies.lock();
        self.arrived.notify_all();
    }

    fn recalled(&self, conn: &UnixStream, ino: u64, lease: u64) {
        if let Some(win) = self.maps.take(lease) {
            win.give_back();
        }
        let held = {
            let mut leases = self.leases.write();
            let key = leases
                .iter()
                .find(|(k, h)| k.0 == ino && h.lease == lease)
                .map(|(k, _)| *k);
            key.and_then(|k| leases.remove(&k))
        };
        if let Some(h) = held {
            self.retire(&h);
        }
        self.send_on(conn, &Msg::Recalled { ino, lease });
    }

    /// Ends this process's use of `h` before it goes back, once the reads
    /// and writes in flight on its window are done: a write lease's
    /// writer first seals its zone writes' time on PM (`Writer::seal`).
    /// A failed persist stops this process's writes, as a write's does.
    fn retire(&self, h: &Held) {
        let mut view = h.view.write();
        let writer = view.as_mut().and_then(|v| v.writer.as_mut());
        if let Some(w) = writer.filter(|_| self.writable.load(Ordering::Acquire)) {
            if w.seal(&self.dev).is_err() {
                self.writable.store(false, Ordering::Release);
            }
        }
        *view = None;
    }
}

fn piece_len(room: u64, want: usize) -> usize {
    usize::try_from(room).map_or(want, |r| r.min(want))
}

/// Whether every run of `g` lies inside a pool of `pool_size` bytes, in
/// the grant's window and inside the file, in file order without
/// overlaps: a grant is the daemon's word, but a bad one must not make
/// this process read outside its mapping.
fn runs_fit(g: &Grant, pool_size: u64) -> bool {
    let Some(first) = g.window.checked_mul(WINDOW_BLOCKS) else {
        return false;
    };
    let last = g
        .size
        .div_ceil(BLOCK)
        .min(first.saturating_add(WINDOW_BLOCKS));
    let mut next = first;
    g.runs.iter().all(|r| {
        let bytes = r.blocks.checked_mul(BLOCK);
        let ok = r.blocks > 0
            && r.file_block >= next
            && r.file_block
                .checked_add(r.blocks)
                .is_some_and(|e| e <= last)
            && r.pool_off.is_multiple_of(BLOCK)
            && bytes
                .and_then(|b| r.pool_off.checked_add(b))
                .is_some_and(|e| e <= pool_size);
        next = r.file_block.saturating_add(r.blocks);
        ok
    })
}

/// The time of a write, as the daemon's own writes take it.
fn now() -> Timespec {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Timespec {
        secs: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nsecs: d.subsec_nanos(),
    }
}

/// Maps the pool the daemon names without its lock — writable if this
/// process may write the pool file (then it may take write leases), else
/// read-only — and checks it is the daemon's file (device, inode, size).
fn map_pool(w: &Welcome) -> io::Result<(Emulated<MmapDevice>, bool)> {
    let meta = std::fs::metadata(&w.pool)?;
    if (meta.dev(), meta.ino(), meta.len()) != (w.pool_dev, w.pool_ino, w.pool_size) {
        return Err(io::Error::other("the pool file is not the daemon's"));
    }
    let spec = if w.emulate.is_empty() {
        EmulatorSpec::dram()
    } else {
        EmulatorSpec::parse(&w.emulate).map_err(|e| io::Error::other(e.to_string()))?
    };
    let opts = MapOptions::default();
    let (dev, writable) = match MmapDevice::open_for_lessee_writer(&w.pool, &opts) {
        Ok(d) => (d, true),
        Err(_) => (
            MmapDevice::open_for_lessee(&w.pool, &opts)
                .map_err(|e| io::Error::other(e.to_string()))?,
            false,
        ),
    };
    Ok((Emulated::new(dev, spec), writable))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(size: u64, runs: &[(u64, u64, u64)]) -> Grant {
        Grant {
            seq: 1,
            ino: 2,
            window: 0,
            lease: 3,
            size,
            runs: runs
                .iter()
                .map(|&(file_block, pool_off, blocks)| Run {
                    file_block,
                    pool_off,
                    blocks,
                })
                .collect(),
            writes: None,
        }
    }

    #[test]
    fn a_grant_must_stay_inside_the_pool_and_the_file() {
        let pool = 1 << 20;
        assert!(runs_fit(
            &grant(3 * BLOCK, &[(0, BLOCK, 1), (2, 8 * BLOCK, 1)]),
            pool
        ));
        assert!(runs_fit(&grant(0, &[]), pool));
        // Past the pool, unaligned, past the file, overlapping, empty, overflowing.
        assert!(!runs_fit(&grant(BLOCK, &[(0, pool, 1)]), pool));
        assert!(!runs_fit(&grant(BLOCK, &[(0, 7, 1)]), pool));
        assert!(!runs_fit(&grant(BLOCK, &[(0, 0, 2)]), pool));
        assert!(!runs_fit(&grant(4 * BLOCK, &[(0, 0, 2), (1, 0, 1)]), pool));
        assert!(!runs_fit(&grant(BLOCK, &[(0, 0, 0)]), pool));
        assert!(!runs_fit(&grant(u64::MAX, &[(0, 0, u64::MAX)]), pool));
        // Past the window, and in the next one.
        let big = WINDOW_BLOCKS * 2 * BLOCK;
        assert!(!runs_fit(&grant(big, &[(WINDOW_BLOCKS, 0, 1)]), pool));
        let mut second = grant(big, &[(WINDOW_BLOCKS, 0, 1)]);
        second.window = 1;
        assert!(runs_fit(&second, pool));
    }
}
