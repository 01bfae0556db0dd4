//! The daemon's lease table (design.md §17.3): which clients read which
//! files under a lease, and the one rule that keeps them right — the
//! daemon changes a file only inside [`Leases::exclusive`], which refuses
//! new grants on it and recalls every lease on it first.

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use amber_core::data::{LeaseEnd, LeasedWrites};

use crate::contention::Bounces;
use crate::owner::Owner;
use crate::wire::{self, Grant, Msg, Refusal, Writes, MAX_GRANTED, WINDOW_BLOCKS};

mod mappers;
mod maps;

/// Most leases one client holds at once; beyond it, the kernel's path.
pub const MAX_LEASES_PER_CLIENT: usize = 1024;

/// A connected client, as the table knows it.
pub struct Peer {
    pub(crate) id: u64,
    /// Frames to the client are written under this lock, whole.
    pub(crate) writer: Mutex<UnixStream>,
    /// The client's process, to cut it off (SIGKILL) when it does not
    /// answer a recall in time.
    pub(crate) pidfd: Option<OwnedFd>,
    pub(crate) pid: i32,
    /// The same socket, to end the connection without the writer lock
    /// (which a grant holds while it takes the table's).
    pub(crate) ender: UnixStream,
}

impl Peer {
    fn send(&self, msg: &Msg) -> io::Result<()> {
        wire::send(&mut *self.writer.lock(), msg)
    }

    /// Ends the connection: the client's lease thread sees the end and
    /// stops every leased read, and this side's reader drops its leases.
    pub(crate) fn end(&self) {
        let _ = self.ender.shutdown(std::net::Shutdown::Both);
    }
}

#[derive(Default)]
struct FileLeases {
    /// (client, lease) pairs reading the file.
    holders: Vec<(u64, u64)>,
    /// Changes under way ([`Exclusive`] guards): grants are refused.
    busy: u32,
    /// Grants settling the file right now; a change waits them out.
    granting: u32,
    /// Of them, write grants: one at a time, and no read grant beside it
    /// (two write grants prepared at once would share the file's seqs).
    granting_writes: u32,
    /// A write grant dropping the kernel's pages of the file before it
    /// settles (`Leases::prime`): no other grant starts, and a change
    /// does not wait for it (the kernel may write a dirty page back
    /// through one while it drops the pages).
    priming: bool,
    /// The kernel read the file's data or attributes while a write grant
    /// was being prepared (`settle_writes`): it may hold a page or
    /// attributes from before the grant, so the grant is refused.
    spoiled: bool,
    /// The write lease among the holders, if one: it excludes every
    /// other lease on the file.
    written: Option<u64>,
    /// Map leases among the holders (design.md §17.14): their holders
    /// show the pool's pages, which a page the kernel caches must not
    /// diverge from, so a kernel read of the data recalls them, as it
    /// does a write lease.
    mapped: u32,
}

/// What a lease lets its holder do, which decides what it excludes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
    /// A map lease (writable or not: either excludes and is recalled
    /// alike).
    Map,
}

impl Kind {
    /// Whether its holder sees or changes the file behind the kernel,
    /// which must then cache no page of it beside the lease: its grant
    /// first has the kernel drop the file's pages (`prime`), and a kernel
    /// read recalls it (`settle_writes`, `settle_reads`). A read-only
    /// map lease too: a process mapping through the kernel could
    /// otherwise store into a cached page its holder never sees.
    fn changes(self) -> bool {
        matches!(self, Kind::Write | Kind::Map)
    }
}

#[derive(Default)]
struct State {
    files: HashMap<u64, FileLeases>,
    /// Each client's (ino, lease) pairs, to drop them when it goes.
    held: HashMap<u64, HashSet<(u64, u64)>>,
    peers: HashMap<u64, Arc<Peer>>,
    /// The grants of the write leases out, by lease: adopted before the
    /// lease leaves the table.
    writes: HashMap<u64, (u64, LeasedWrites)>,
    /// The map leases out, by lease: their file and the core's mapping
    /// pinning its blocks.
    maps: HashMap<u64, (u64, amber_core::MapId)>,
    next_lease: u64,
    bounces: Bounces,
    /// Files preloaded processes map, which no write lease is granted on.
    mappers: mappers::Mappers,
    /// The daemon is stopping: no more grants.
    closing: bool,
}

/// What the table did, for `amberfs stats`.
#[derive(Debug, Default)]
pub struct Counters {
    pub granted: AtomicU64,
    pub refused: AtomicU64,
    /// Of the refusals, those for a contended file (`contention.rs`).
    pub contended: AtomicU64,
    /// Of the refusals, write leases on a file a preloaded process maps
    /// (`mappers.rs`).
    pub refused_mapped: AtomicU64,
    pub recalled: AtomicU64,
    pub cut_off: AtomicU64,
    /// Of the grants, write leases.
    pub written: AtomicU64,
    /// Of the grants, map leases.
    pub mapped: AtomicU64,
}

/// What the owner prepared for a request, before it is registered.
enum Prepared {
    /// A read or write lease on a window.
    Lease(Box<Settled>, u64),
    /// A map lease: the core's mapping and the runs it pins.
    Map(amber_core::MapId, Vec<amber_core::Run>),
}

/// What the owner settled for a grant.
struct Settled {
    view: amber_core::LeaseView,
    writes: Option<LeasedWrites>,
    /// A write lease's grant as its holder takes it.
    wire: Option<Writes>,
}

impl Settled {
    fn into_grant(self, seq: u64, (ino, window): (u64, u64), lease: u64) -> Grant {
        Grant {
            seq,
            ino,
            window,
            lease,
            size: self.view.size,
            runs: self.view.runs,
            writes: self.wire,
        }
    }
}

/// Whether a new lease of `kind` on `f` would meet one it excludes: a
/// write lease excludes every other (a lessee writes out of place, which
/// would move a mapped block). Read and map leases share a file: a
/// mapping's stores and the daemon's in-place writes reach the blocks
/// readers read.
impl FileLeases {
    /// A grant of `kind` that was being prepared is answered.
    fn stop_granting(&mut self, kind: Kind) {
        self.granting -= 1;
        self.granting_writes -= u32::from(kind.changes());
    }
}

fn conflicts(f: &FileLeases, kind: Kind) -> bool {
    match kind {
        Kind::Write => !f.holders.is_empty(),
        Kind::Read | Kind::Map => f.written.is_some(),
    }
}

/// A recall that did not end: the client neither answered nor died
/// within twice the timeout after it was killed.
#[derive(Debug)]
pub struct Unresponsive {
    pub pid: i32,
}

/// The daemon's leases.
pub struct Leases {
    state: Mutex<State>,
    changed: Condvar,
    timeout: Duration,
    owner: Arc<dyn Owner>,
    /// Drops the kernel's cached pages and attributes of a file (the
    /// mount's FUSE notifier), set once the session exists.
    drop_cached: std::sync::OnceLock<CacheInvalidator>,
    /// Write leases registered and not yet out of the table: while none
    /// is, and no write or map grant is being prepared
    /// (`preparing_writes`), `settle_writes` (every FUSE getattr and
    /// lookup) takes no lock.
    writes_out: AtomicU64,
    /// Map leases likewise: `settle_reads` (every FUSE read) takes no
    /// lock while neither kind is out. A map lease changes no size or
    /// time, so getattr and lookup need not look at it.
    maps_out: AtomicU64,
    /// Write grants from priming to their registration or refusal.
    preparing_writes: AtomicU64,
    pub counters: Counters,
}

/// How the table makes the kernel drop its pages of a file and ask the
/// daemon for them and its attributes again (`Leases::on_write_grant`).
pub type CacheInvalidator = Box<dyn Fn(u64) + Send + Sync>;

/// Blocks a write lease is granted at a time; a lessee that used them
/// returns the lease (its writes are adopted) and asks again.
const GRANTED: usize = 1024;
const _: () = assert!(GRANTED <= MAX_GRANTED);

impl Leases {
    /// A table over `owner`'s pool whose recalls wait `timeout` for an
    /// answer before cutting the client off.
    pub fn new(timeout: Duration, owner: Arc<dyn Owner>) -> Leases {
        Leases {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            timeout,
            owner,
            drop_cached: std::sync::OnceLock::new(),
            writes_out: AtomicU64::new(0),
            maps_out: AtomicU64::new(0),
            preparing_writes: AtomicU64::new(0),
            counters: Counters::default(),
        }
    }

    /// Has `f` drop the kernel's cached pages and attributes of a file
    /// each time a write lease on it is to be granted, before the grant
    /// settles: the lessee's writes change the file behind the kernel,
    /// whose next fill of a page (a load from a `MAP_SHARED` mapping) or
    /// `stat` must then ask the daemon, which recalls the lease first.
    /// `f` must return only once the kernel dropped them, and may have
    /// the kernel write a dirty page back through the mount meanwhile.
    /// Set once (the mount's session is made after the table).
    pub fn on_write_grant(&self, f: CacheInvalidator) {
        let _ = self.drop_cached.set(f);
    }

    pub(crate) fn join(&self, peer: Arc<Peer>) {
        let mut st = self.state.lock();
        st.held.insert(peer.id, HashSet::new());
        st.peers.insert(peer.id, peer);
    }

    /// Drops everything client `id` held: it is gone (its socket closed,
    /// or it was cut off and died — the caller waited for its death), so
    /// it reads and writes nothing any more. Its write leases are
    /// adopted first, while they still keep changes of their files off.
    pub(crate) fn leave(&self, id: u64) {
        let held: Vec<_> = {
            let mut st = self.state.lock();
            st.peers.remove(&id);
            st.mappers.forget(id);
            st.held
                .get(&id)
                .map(|h| h.iter().copied().collect())
                .unwrap_or_default()
        };
        for (ino, lease) in held {
            self.give_back(id, ino, lease, LeaseEnd::Abandoned);
        }
        self.state.lock().held.remove(&id);
    }

    /// Client `id` no longer uses `ino` under `lease`, ended as `end`
    /// says (it returned the lease or answered its recall: `Returned`; it
    /// is gone: `Abandoned`). A write lease's grant is adopted before the
    /// lease leaves the table, so a change of the file waiting on the
    /// lease finds the lessee's writes in the core.
    pub(crate) fn give_back(&self, id: u64, ino: u64, lease: u64, end: LeaseEnd) {
        let mut st = self.state.lock();
        if !st.held.get(&id).is_some_and(|h| h.contains(&(ino, lease))) {
            return;
        }
        if let Some((i, writes)) = st.writes.remove(&lease) {
            drop(st);
            debug_assert_eq!(i, ino);
            self.owner.adopt(ino, &writes, end);
            st = self.state.lock();
        }
        if let Some((i, id)) = st.maps.remove(&lease) {
            drop(st);
            debug_assert_eq!(i, ino);
            self.owner.unmap(ino, id);
            st = self.state.lock();
            if let Some(f) = st.files.get_mut(&ino) {
                f.mapped -= 1;
            }
            self.maps_out.fetch_sub(1, Ordering::AcqRel);
        }
        if let Some(h) = st.held.get_mut(&id) {
            h.remove(&(ino, lease));
        }
        if let Some(f) = st.files.get_mut(&ino) {
            if f.written == Some(lease) {
                f.written = None;
                // Only now: until the holder is out, reads must recall.
                self.writes_out.fetch_sub(1, Ordering::AcqRel);
            }
        }
        drop_holder(&mut st, ino, (id, lease));
        self.changed.notify_all();
    }

    /// Answers client `peer`'s request `seq` for a lease on window
    /// `window` of `ino` (a write lease if `write`): settles it through
    /// the owner and sends the grant, or a refusal. The grant is
    /// registered and sent under the peer's writer lock, so a recall of it
    /// can only reach the client after it.
    pub(crate) fn grant(
        &self,
        peer: &Peer,
        seq: u64,
        (ino, window): (u64, u64),
        write: bool,
    ) -> io::Result<()> {
        let kind = if write { Kind::Write } else { Kind::Read };
        if let Err(why) = self.start_grant(peer.id, ino, kind) {
            return self.refuse(peer, seq, ino, why);
        }
        let seen = window
            .checked_mul(WINDOW_BLOCKS)
            .and_then(|first| self.settle(ino, (first, WINDOW_BLOCKS), write));
        let prepared = seen.map(|g| Prepared::Lease(Box::new(g), window));
        self.answer(peer, (seq, ino), kind, prepared)
    }

    /// Sends what was prepared for client `peer`'s request `seq` on `ino`
    /// (`None`: the owner refused), registered as a lease of `kind` —
    /// unless the file turned busy, a kernel read spoiled a grant that
    /// primed it, or a lease it excludes came meanwhile: then a refusal,
    /// and what was prepared goes back to the owner. Registered and sent
    /// under the peer's writer lock, so a recall of it can only reach the
    /// client after it.
    fn answer(
        &self,
        peer: &Peer,
        (seq, ino): (u64, u64),
        kind: Kind,
        prepared: Option<Prepared>,
    ) -> io::Result<()> {
        let mut w = peer.writer.lock();
        let mut st = self.state.lock();
        let mapped = kind == Kind::Write && st.mappers.maps(ino);
        let f = st.files.entry(ino).or_default();
        let spoiled = kind.changes() && std::mem::take(&mut f.spoiled);
        let why = if mapped {
            Some(Refusal::Mapped)
        } else if f.busy > 0 || spoiled || conflicts(f, kind) {
            Some(Refusal::Busy)
        } else {
            prepared.is_none().then_some(Refusal::Unleasable)
        };
        // A refused grant whose blocks are still out stays granting until
        // they go back (`give_back_unsent`): a change of the file waits.
        if prepared.is_none() || why.is_none() {
            f.stop_granting(kind);
        }
        let (msg, unused) = match (prepared, why) {
            (Some(p), None) => (self.register(&mut st, peer.id, (seq, ino), p), None),
            (Some(p), Some(why)) => (Msg::Refused { seq, ino, why }, Some(p)),
            (None, why) => {
                forget_if_idle(&mut st, ino);
                self.changed.notify_all();
                let why = why.unwrap_or(Refusal::Unleasable);
                (Msg::Refused { seq, ino, why }, None)
            }
        };
        if kind.changes() {
            // Registered (or refused) under the lock: kernel reads from
            // here on recall the lease instead.
            self.preparing_writes.fetch_sub(1, Ordering::AcqRel);
        }
        drop(st);
        if let Msg::Refused { why, .. } = msg {
            self.count_refusal(why);
        }
        let sent = wire::send(&mut *w, &msg);
        drop(w);
        if let Some(p) = unused {
            self.give_back_unsent(ino, kind, p);
        }
        sent
    }

    /// What was prepared for a grant that was refused goes back to the
    /// owner (granted blocks to the allocator, pinned ones unpinned),
    /// and only then does the file stop counting as granting: the core
    /// takes no seq of a file while a write grant of it is out.
    fn give_back_unsent(&self, ino: u64, kind: Kind, prepared: Prepared) {
        match prepared {
            Prepared::Lease(g, _) => {
                if let Some(writes) = g.writes {
                    self.owner.adopt(ino, &writes, LeaseEnd::Unused);
                }
            }
            Prepared::Map(id, ..) => self.owner.unmap(ino, id),
        }
        let mut st = self.state.lock();
        st.files.entry(ino).or_default().stop_granting(kind);
        forget_if_idle(&mut st, ino);
        self.changed.notify_all();
    }

    /// The owner's half of a grant: the window's view, and for a write
    /// lease the blocks granted.
    fn settle(&self, ino: u64, window: (u64, u64), write: bool) -> Option<Settled> {
        if !write {
            let view = self.owner.view(ino, window.0, window.1)?;
            return Some(Settled {
                view,
                writes: None,
                wire: None,
            });
        }
        let w = self.owner.write(ino, window, GRANTED)?;
        let wire = Writes::of(&w);
        Some(Settled {
            view: w.view,
            writes: Some(w.writes),
            wire: Some(wire),
        })
    }

    /// Starts preparing a grant of `ino` to client `id`; one whose holder
    /// changes the file first has the kernel drop its pages of it
    /// (`prime`).
    fn start_grant(&self, id: u64, ino: u64, kind: Kind) -> Result<(), Refusal> {
        if kind.changes() {
            self.prime(id, ino, kind)?;
        }
        let mut st = self.state.lock();
        let admitted = admit(&mut st, id, ino, kind);
        let f = st.files.entry(ino).or_default();
        if admitted.is_ok() {
            f.granting += 1;
            f.granting_writes += u32::from(kind.changes());
            return Ok(());
        }
        if kind.changes() {
            f.spoiled = false;
            self.preparing_writes.fetch_sub(1, Ordering::AcqRel);
        }
        forget_if_idle(&mut st, ino);
        admitted
    }

    /// A write grant's first phase: has the kernel drop its pages and
    /// attributes of `ino` while every other grant of it is held off. A
    /// change through the kernel may run meanwhile (dropping a dirty page
    /// writes it back through one); a read through the kernel from here
    /// to the grant's registration spoils the grant (`settle_writes`), as
    /// the kernel may keep what it read.
    fn prime(&self, id: u64, ino: u64, kind: Kind) -> Result<(), Refusal> {
        {
            let mut st = self.state.lock();
            if let Err(why) = admit(&mut st, id, ino, kind) {
                forget_if_idle(&mut st, ino);
                return Err(why);
            }
            let f = st.files.entry(ino).or_default();
            f.priming = true;
            f.spoiled = false;
            self.preparing_writes.fetch_add(1, Ordering::AcqRel);
        }
        if let Some(drop_cached) = self.drop_cached.get() {
            drop_cached(ino);
        }
        self.state.lock().files.entry(ino).or_default().priming = false;
        Ok(())
    }

    /// Registers what was prepared for client `id`'s request `seq` on
    /// `ino` as a new lease (a write lease's grant, a map lease's
    /// mapping kept for its end); the message that grants it.
    fn register(&self, st: &mut State, id: u64, (seq, ino): (u64, u64), p: Prepared) -> Msg {
        st.next_lease += 1;
        let lease = st.next_lease;
        let f = st.files.entry(ino).or_default();
        f.holders.push((id, lease));
        let msg = match p {
            Prepared::Lease(g, window) => {
                if let Some(w) = g.writes.clone() {
                    f.written = Some(lease);
                    st.writes.insert(lease, (ino, w));
                    self.writes_out.fetch_add(1, Ordering::AcqRel);
                    self.counters.written.fetch_add(1, Ordering::Relaxed);
                }
                Msg::Granted((*g).into_grant(seq, (ino, window), lease))
            }
            Prepared::Map(map, runs) => {
                f.mapped += 1;
                self.maps_out.fetch_add(1, Ordering::AcqRel);
                st.maps.insert(lease, (ino, map));
                self.counters.mapped.fetch_add(1, Ordering::Relaxed);
                Msg::Mapped {
                    seq,
                    ino,
                    lease,
                    runs,
                }
            }
        };
        st.held.entry(id).or_default().insert((ino, lease));
        self.counters.granted.fetch_add(1, Ordering::Relaxed);
        self.changed.notify_all();
        msg
    }

    /// Client `peer` maps `ino` (or every file) until it goes (its
    /// request `seq`): no write lease on the file from now, which the
    /// answer says. A write lease out on it stays until recalled: the
    /// client next has the kernel take the file's size from the daemon
    /// (a getattr), which recalls it.
    pub(crate) fn note_mapper(&self, peer: &Peer, seq: u64, ino: u64) -> io::Result<()> {
        self.state.lock().mappers.note(peer.id, ino);
        peer.send(&Msg::Noted { seq })
    }

    fn refuse(&self, peer: &Peer, seq: u64, ino: u64, why: Refusal) -> io::Result<()> {
        self.count_refusal(why);
        peer.send(&Msg::Refused { seq, ino, why })
    }

    fn count_refusal(&self, why: Refusal) {
        self.counters.refused.fetch_add(1, Ordering::Relaxed);
        let of = match why {
            Refusal::Contended => &self.counters.contended,
            Refusal::Mapped => &self.counters.refused_mapped,
            Refusal::Busy | Refusal::Unleasable | Refusal::Limit => return,
        };
        of.fetch_add(1, Ordering::Relaxed);
    }

    /// Recalls every lease on `ino` and holds new grants off until the
    /// guard drops: the daemon changes the file (its data, size or
    /// blocks, or frees it) only while holding one. A client that does
    /// not answer within the timeout is killed; if it has not died after
    /// as long again, the change fails rather than go ahead under it.
    pub fn exclusive(&self, ino: u64) -> Result<Exclusive<'_>, Unresponsive> {
        let mut st = self.state.lock();
        st.files.entry(ino).or_default().busy += 1;
        let guard = Exclusive { leases: self, ino };
        let idle = |f: &FileLeases| f.holders.is_empty() && f.granting == 0;
        if st.files.get(&ino).is_some_and(idle) {
            return Ok(guard);
        }
        let mut recalled: HashSet<u64> = HashSet::new();
        let mut deadline = Instant::now() + self.timeout;
        let mut killed = false;
        // Each round sends recalls or waits on the condition variable
        // until the deadline; the deadline moves once (after a kill).
        loop {
            let f = &st.files[&ino];
            if idle(f) {
                return Ok(guard);
            }
            let fresh: Vec<(u64, u64)> = f
                .holders
                .iter()
                .filter(|h| !recalled.contains(&h.1))
                .copied()
                .collect();
            if !fresh.is_empty() {
                st.bounces.recalled(ino, Instant::now());
                st = self.send_recalls(st, ino, &fresh);
                recalled.extend(fresh.iter().map(|h| h.1));
                continue;
            }
            if !self.changed.wait_until(&mut st, deadline).timed_out() {
                continue;
            }
            if killed {
                let pid = st.files[&ino]
                    .holders
                    .first()
                    .map_or(0, |h| peer_pid(&st, h.0));
                // The guard, dropped on return, takes the table's lock.
                drop(st);
                return Err(Unresponsive { pid });
            }
            self.cut_off(&st, ino);
            killed = true;
            deadline = Instant::now() + self.timeout * 2;
        }
    }

    /// Sends the recalls without holding the table, so a client's answer
    /// (or a grant writing to it) is never stuck behind this thread.
    fn send_recalls<'a>(
        &'a self,
        st: MutexGuard<'a, State>,
        ino: u64,
        holders: &[(u64, u64)],
    ) -> MutexGuard<'a, State> {
        let peers: Vec<_> = holders
            .iter()
            .filter_map(|&(id, lease)| st.peers.get(&id).map(|p| (Arc::clone(p), lease)))
            .collect();
        drop(st);
        for (peer, lease) in peers {
            self.counters.recalled.fetch_add(1, Ordering::Relaxed);
            if peer.send(&Msg::Recall { ino, lease }).is_err() {
                // A client that cannot be written to is gone or going:
                // its reader thread drops its leases when the socket ends.
                peer.end();
            }
        }
        self.state.lock()
    }

    /// Kills the clients still holding `ino`: SIGKILL through the pidfd
    /// taken when they connected, so a recycled pid is never signalled.
    fn cut_off(&self, st: &State, ino: u64) {
        for (id, _) in &st.files[&ino].holders {
            let Some(peer) = st.peers.get(id) else {
                continue;
            };
            self.counters.cut_off.fetch_add(1, Ordering::Relaxed);
            crate::log(format_args!(
                "process {} did not answer a lease recall on inode {ino} within {:?}; killing it",
                peer.pid, self.timeout
            ));
            if let Some(fd) = &peer.pidfd {
                let _ = rustix::process::pidfd_send_signal(fd, rustix::process::Signal::KILL);
            }
            peer.end();
        }
    }

    /// How many leases are held now.
    pub fn held(&self) -> usize {
        self.state.lock().held.values().map(HashSet::len).sum()
    }
}

fn peer_pid(st: &State, id: u64) -> i32 {
    st.peers.get(&id).map_or(0, |p| p.pid)
}

fn drop_holder(st: &mut State, ino: u64, holder: (u64, u64)) {
    if let Some(f) = st.files.get_mut(&ino) {
        f.holders.retain(|h| *h != holder);
    }
    forget_if_idle(st, ino);
}

/// Drops `ino`'s entry once nothing refers to it, so the table holds
/// only files with leases, grants or changes under way.
/// Whether a grant of `ino` to client `id` (a write grant if `write`)
/// may start now; a write grant asks twice, before and after `prime`.
fn admit(st: &mut State, id: u64, ino: u64, kind: Kind) -> Result<(), Refusal> {
    if st.closing {
        return Err(Refusal::Unleasable);
    }
    if st.held.get(&id).map_or(0, HashSet::len) >= MAX_LEASES_PER_CLIENT {
        return Err(Refusal::Limit);
    }
    if st.bounces.contended(ino, Instant::now()) {
        return Err(Refusal::Contended);
    }
    if kind == Kind::Write && st.mappers.maps(ino) {
        return Err(Refusal::Mapped);
    }
    let f = st.files.entry(ino).or_default();
    let racing = f.priming || f.granting_writes > 0 || (kind == Kind::Write && f.granting > 0);
    if f.busy > 0 || racing || conflicts(f, kind) || (kind.changes() && f.spoiled) {
        return Err(Refusal::Busy);
    }
    Ok(())
}

fn forget_if_idle(st: &mut State, ino: u64) {
    if st
        .files
        .get(&ino)
        .is_some_and(|f| f.holders.is_empty() && f.busy == 0 && f.granting == 0 && !f.priming)
    {
        st.files.remove(&ino);
    }
}

/// A change of one file under way; grants on it resume when dropped.
pub struct Exclusive<'a> {
    leases: &'a Leases,
    ino: u64,
}

impl Drop for Exclusive<'_> {
    fn drop(&mut self) {
        let mut st = self.leases.state.lock();
        if let Some(f) = st.files.get_mut(&self.ino) {
            f.busy -= 1;
        }
        forget_if_idle(&mut st, self.ino);
    }
}

impl Leases {
    /// Recalls the write leases on `ino` before the daemon reads its size
    /// or times for a request: their holder's writes are then the core's.
    /// A read while a write grant of the file is being prepared spoils the
    /// grant (`prime`). Nothing to do, and no lock, while no write lease
    /// is out or being prepared (map leases need no settling here).
    pub fn settle_writes(&self, ino: u64) -> Result<Option<Exclusive<'_>>, Unresponsive> {
        self.settle_for(ino, false)
    }

    /// `settle_writes` before the daemon reads `ino`'s data for the
    /// kernel, which may cache it in a page: map leases are recalled too
    /// (their holders show the pool's pages, which a cached page must
    /// not diverge from; they change no size or time).
    pub fn settle_reads(&self, ino: u64) -> Result<Option<Exclusive<'_>>, Unresponsive> {
        self.settle_for(ino, true)
    }

    fn settle_for(&self, ino: u64, data: bool) -> Result<Option<Exclusive<'_>>, Unresponsive> {
        // Registered under the table's lock before the grant is sent, so
        // a write that returned is counted here.
        if self.writes_out.load(Ordering::Acquire) == 0
            && self.preparing_writes.load(Ordering::Acquire) == 0
            && (!data || self.maps_out.load(Ordering::Acquire) == 0)
        {
            return Ok(None);
        }
        let written = {
            let mut st = self.state.lock();
            st.files.get_mut(&ino).is_some_and(|f| {
                let changing = f.written.is_some() || (data && f.mapped > 0);
                f.spoiled |= !changing && (f.priming || f.granting_writes > 0);
                changing
            })
        };
        if written {
            self.exclusive(ino).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Whether client `id` holds a write or map lease: it must not
    /// outlive its connection (`server::wait_gone`), or it could store
    /// into blocks its lease no longer covers.
    pub(crate) fn writes_held(&self, id: u64) -> bool {
        let st = self.state.lock();
        st.held.get(&id).is_some_and(|h| {
            h.iter()
                .any(|(_, l)| st.writes.contains_key(l) || st.maps.contains_key(l))
        })
    }

    /// Ends every client's connection (the daemon is stopping), after
    /// recalling every write lease so its writes are adopted while the
    /// core is still mounted; no grant is made after.
    pub(crate) fn end_all(&self) {
        let written: Vec<u64> = {
            let mut st = self.state.lock();
            st.closing = true;
            let maps = st.maps.values().map(|m| m.0);
            st.writes
                .values()
                .map(|(ino, _)| *ino)
                .chain(maps)
                .collect()
        };
        for ino in written {
            drop(self.exclusive(ino));
        }
        let peers: Vec<_> = self.state.lock().peers.values().cloned().collect();
        for p in peers {
            p.end();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_core::{LeaseView, Run, WriteLease};

    /// An owner of one-block files that counts the grants adopted.
    #[derive(Default)]
    struct TestOwner {
        adopted: Mutex<Vec<(u64, LeasedWrites)>>,
        /// Map leases' mappings made and ended.
        mapped: AtomicU64,
        unmapped: Mutex<Vec<amber_core::MapId>>,
        /// Runs while a write grant settles (a FUSE request meanwhile).
        settling: Mutex<Option<CacheInvalidator>>,
    }

    impl Owner for TestOwner {
        fn view(&self, _ino: u64, _first: u64, _count: u64) -> Option<LeaseView> {
            Some(LeaseView {
                generation: 1,
                size: 4096,
                runs: vec![Run {
                    file_block: 0,
                    pool_off: 1 << 20,
                    blocks: 1,
                }],
            })
        }

        fn write(&self, ino: u64, w: (u64, u64), n: usize) -> Option<WriteLease> {
            if let Some(f) = &*self.settling.lock() {
                f(ino);
            }
            Some(WriteLease {
                view: self.view(ino, w.0, w.1)?,
                writes: LeasedWrites {
                    seq: 10,
                    blocks: (100..100 + n as u64).collect(),
                    mapped: 1,
                    head: Some((0, 256)),
                    slots: None,
                },
                records: 1 << 16,
                log: 1 << 15,
            })
        }

        fn adopt(&self, ino: u64, writes: &LeasedWrites, _end: LeaseEnd) {
            self.adopted.lock().push((ino, writes.clone()));
        }

        fn map(
            &self,
            ino: u64,
            (first, count): (u64, u64),
            _writable: bool,
        ) -> Option<(amber_core::MapId, LeaseView)> {
            let id = self.mapped.fetch_add(1, Ordering::Relaxed);
            Some((amber_core::MapId(id), self.view(ino, first, count)?))
        }

        fn unmap(&self, _ino: u64, id: amber_core::MapId) {
            self.unmapped.lock().push(id);
        }
    }

    /// A table with one peer; the other end of its socket is the client.
    fn with_peer(timeout: Duration) -> (Arc<Leases>, Arc<Peer>, UnixStream) {
        let (leases, peer, client, _) = with_owner(timeout);
        (leases, peer, client)
    }

    fn with_owner(timeout: Duration) -> (Arc<Leases>, Arc<Peer>, UnixStream, Arc<TestOwner>) {
        let owner = Arc::new(TestOwner::default());
        let leases = Arc::new(Leases::new(timeout, Arc::clone(&owner) as Arc<dyn Owner>));
        let (a, b) = UnixStream::pair().unwrap();
        let peer = Arc::new(peer_on(1, a));
        leases.join(Arc::clone(&peer));
        (leases, peer, b, owner)
    }

    /// Client `id` as the table knows it, writing to `socket`.
    fn peer_on(id: u64, socket: UnixStream) -> Peer {
        Peer {
            id,
            ender: socket.try_clone().unwrap(),
            writer: Mutex::new(socket),
            pidfd: None,
            pid: 0,
        }
    }

    /// Client `peer` maps `ino` (its request `seq`), which the table says.
    fn noted(leases: &Leases, peer: &Peer, client: &mut UnixStream, seq: u64, ino: u64) {
        leases.note_mapper(peer, seq, ino).unwrap();
        assert_eq!(wire::recv(client).unwrap(), Some(Msg::Noted { seq }));
    }

    fn granted(leases: &Leases, peer: &Peer, client: &mut UnixStream, ino: u64) -> u64 {
        asked(leases, peer, client, ino, false).expect("a grant")
    }

    /// The lease number granted, or the refusal's reason.
    fn asked(
        leases: &Leases,
        peer: &Peer,
        client: &mut UnixStream,
        ino: u64,
        write: bool,
    ) -> Result<u64, Refusal> {
        leases.grant(peer, 1, (ino, 0), write).unwrap();
        match wire::recv(client).unwrap() {
            Some(Msg::Granted(g)) => {
                assert_eq!(g.writes.is_some(), write);
                Ok(g.lease)
            }
            Some(Msg::Refused { why, .. }) => Err(why),
            other => panic!("expected an answer, got {other:?}"),
        }
    }

    #[test]
    fn a_write_lease_excludes_others_and_is_adopted_when_it_comes_back() {
        let (leases, peer, mut client, owner) = with_owner(Duration::from_secs(30));
        let read = granted(&leases, &peer, &mut client, 7);
        assert_eq!(
            asked(&leases, &peer, &mut client, 7, true),
            Err(Refusal::Busy)
        );
        leases.give_back(peer.id, 7, read, LeaseEnd::Returned);
        let write = asked(&leases, &peer, &mut client, 7, true).unwrap();
        assert_eq!(
            asked(&leases, &peer, &mut client, 7, false),
            Err(Refusal::Busy)
        );
        assert!(leases.writes_held(peer.id));
        assert!(owner.adopted.lock().is_empty());
        // A read through the daemon recalls it; the answer adopts it.
        let l = Arc::clone(&leases);
        let reading = std::thread::spawn(move || l.settle_writes(7).map(|g| g.is_some()));
        assert_eq!(
            wire::recv(&mut client).unwrap(),
            Some(Msg::Recall {
                ino: 7,
                lease: write
            })
        );
        leases.give_back(peer.id, 7, write, LeaseEnd::Returned);
        assert!(matches!(reading.join().unwrap(), Ok(true)));
        let adopted = owner.adopted.lock().clone();
        assert_eq!(adopted.len(), 1);
        assert_eq!(adopted[0].0, 7);
        assert_eq!(adopted[0].1.blocks.len(), GRANTED);
        assert!(!leases.writes_held(peer.id));
        assert!(matches!(leases.settle_writes(7), Ok(None)));
    }

    #[test]
    fn a_write_grant_being_prepared_refuses_every_other() {
        let (leases, peer, mut client, owner) = with_owner(Duration::from_secs(30));
        // Another client's write grant settles the file right now: a
        // second one would share its seqs, and a read grant would see the
        // file before the write lease excludes it.
        leases.start_grant(2, 9, Kind::Write).unwrap();
        for write in [true, false] {
            assert_eq!(
                asked(&leases, &peer, &mut client, 9, write),
                Err(Refusal::Busy)
            );
        }
        assert!(owner.adopted.lock().is_empty());
        // A read grant being prepared refuses a write grant only.
        leases.start_grant(2, 10, Kind::Read).unwrap();
        assert_eq!(
            asked(&leases, &peer, &mut client, 10, true),
            Err(Refusal::Busy)
        );
        granted(&leases, &peer, &mut client, 10);
    }

    #[test]
    fn a_write_grant_drops_the_kernels_pages_and_a_read_meanwhile_spoils_it() {
        let (leases, peer, mut client, owner) = with_owner(Duration::from_secs(30));
        // The invalidator as the kernel runs it: a dirty page written
        // back (a change, which must not wait for the grant), then, in
        // the first grant only, a page faulted in again (a read).
        let dropped = Arc::new(AtomicU64::new(0));
        let (l, d) = (Arc::downgrade(&leases), Arc::clone(&dropped));
        leases.on_write_grant(Box::new(move |ino| {
            let l = l.upgrade().unwrap();
            drop(l.exclusive(ino).unwrap());
            if d.fetch_add(1, Ordering::AcqRel) == 0 {
                assert!(matches!(l.settle_writes(ino), Ok(None)));
            }
        }));
        assert_eq!(
            asked(&leases, &peer, &mut client, 7, true),
            Err(Refusal::Busy)
        );
        assert_eq!(dropped.load(Ordering::Acquire), 1);
        assert!(owner.adopted.lock().is_empty(), "refused before any block");
        asked(&leases, &peer, &mut client, 7, true).unwrap();
        assert_eq!(dropped.load(Ordering::Acquire), 2);
        assert_eq!(leases.preparing_writes.load(Ordering::Acquire), 0);
        // A read while the grant settles (past priming) spoils it too:
        // refused, its blocks back unused.
        let l = Arc::downgrade(&leases);
        *owner.settling.lock() = Some(Box::new(move |ino| {
            assert!(matches!(l.upgrade().unwrap().settle_writes(ino), Ok(None)));
        }));
        assert_eq!(
            asked(&leases, &peer, &mut client, 9, true),
            Err(Refusal::Busy)
        );
        assert_eq!(owner.adopted.lock().len(), 1, "the unsent grant's blocks");
        *owner.settling.lock() = None;
        asked(&leases, &peer, &mut client, 9, true).unwrap();
        assert_eq!(dropped.load(Ordering::Acquire), 4);
        // A read grant drops nothing.
        granted(&leases, &peer, &mut client, 8);
        assert_eq!(dropped.load(Ordering::Acquire), 4);
    }

    #[test]
    fn a_client_that_leaves_has_its_write_leases_adopted() {
        let (leases, peer, mut client, owner) = with_owner(Duration::from_secs(30));
        asked(&leases, &peer, &mut client, 3, true).unwrap();
        asked(&leases, &peer, &mut client, 4, true).unwrap();
        leases.leave(peer.id);
        let mut inos: Vec<u64> = owner.adopted.lock().iter().map(|a| a.0).collect();
        inos.sort_unstable();
        assert_eq!(inos, [3, 4]);
        assert_eq!(leases.held(), 0);
        assert!(leases.state.lock().files.is_empty());
    }

    #[test]
    fn a_change_waits_for_the_recall_to_be_answered() {
        let (leases, peer, mut client) = with_peer(Duration::from_secs(30));
        let lease = granted(&leases, &peer, &mut client, 7);
        assert_eq!(leases.held(), 1);
        let l = Arc::clone(&leases);
        let change = std::thread::spawn(move || l.exclusive(7).is_ok());
        assert_eq!(
            wire::recv(&mut client).unwrap(),
            Some(Msg::Recall { ino: 7, lease })
        );
        assert!(!change.is_finished());
        leases.give_back(1, 7, lease, LeaseEnd::Returned);
        assert!(change.join().unwrap());
        assert_eq!(leases.held(), 0);
        assert_eq!(leases.counters.recalled.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn grants_are_refused_while_a_change_is_under_way() {
        let (leases, peer, mut client) = with_peer(Duration::from_secs(30));
        let change = leases.exclusive(9).unwrap();
        leases.grant(&peer, 5, (9, 0), false).unwrap();
        let refused = Msg::Refused {
            seq: 5,
            ino: 9,
            why: Refusal::Busy,
        };
        assert_eq!(wire::recv(&mut client).unwrap(), Some(refused));
        drop(change);
        granted(&leases, &peer, &mut client, 9);
    }

    #[test]
    fn a_silent_lessee_is_cut_off_and_then_the_change_fails() {
        let (leases, peer, mut client) = with_peer(Duration::from_millis(20));
        granted(&leases, &peer, &mut client, 3);
        assert!(leases.exclusive(3).is_err());
        assert_eq!(leases.counters.cut_off.load(Ordering::Relaxed), 1);
        // The connection was ended: the client reads the recall, then EOF.
        assert!(matches!(
            wire::recv(&mut client),
            Ok(Some(Msg::Recall { .. }))
        ));
        assert!(matches!(wire::recv(&mut client), Ok(None)));
        // Its reader thread then drops what it held.
        leases.leave(peer.id);
        assert!(leases.exclusive(3).is_ok());
    }

    #[test]
    fn a_file_a_client_maps_is_read_leased_but_never_write_leased_until_it_goes() {
        let (leases, peer, mut client) = with_peer(Duration::from_secs(30));
        noted(&leases, &peer, &mut client, 5, 7);
        assert_eq!(
            asked(&leases, &peer, &mut client, 7, true),
            Err(Refusal::Mapped)
        );
        assert_eq!(leases.counters.refused_mapped.load(Ordering::Relaxed), 1);
        let read = granted(&leases, &peer, &mut client, 7);
        leases.give_back(peer.id, 7, read, LeaseEnd::Returned);
        assert!(asked(&leases, &peer, &mut client, 8, true).is_ok());
        // Every file, once a client maps more than it tells apart.
        noted(&leases, &peer, &mut client, 6, wire::ALL_FILES);
        assert_eq!(
            asked(&leases, &peer, &mut client, 9, true),
            Err(Refusal::Mapped)
        );
        leases.leave(peer.id);
        let (a, _b) = UnixStream::pair().unwrap();
        leases.grant(&peer_on(2, a), 1, (7, 0), true).unwrap();
        assert_eq!(leases.counters.written.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_write_grant_prepared_while_the_file_was_mapped_is_refused() {
        let (leases, peer, mut client) = with_peer(Duration::from_secs(30));
        leases.start_grant(peer.id, 4, Kind::Write).unwrap();
        leases.note_mapper(&peer, 2, 4).unwrap();
        let prepared = leases.settle(4, (0, WINDOW_BLOCKS), true);
        leases
            .answer(
                &peer,
                (1, 4),
                Kind::Write,
                prepared.map(|g| Prepared::Lease(Box::new(g), 0)),
            )
            .unwrap();
        assert_eq!(
            wire::recv(&mut client).unwrap(),
            Some(Msg::Noted { seq: 2 })
        );
        assert!(matches!(
            wire::recv(&mut client).unwrap(),
            Some(Msg::Refused {
                why: Refusal::Mapped,
                ..
            })
        ));
        assert_eq!(leases.held(), 0);
    }

    #[test]
    fn a_client_that_leaves_drops_its_leases() {
        let (leases, peer, mut client) = with_peer(Duration::from_secs(30));
        granted(&leases, &peer, &mut client, 4);
        granted(&leases, &peer, &mut client, 5);
        leases.leave(peer.id);
        assert_eq!(leases.held(), 0);
        assert!(leases.exclusive(4).is_ok());
        assert!(
            leases.state.lock().files.is_empty(),
            "an idle file stayed in the table"
        );
    }

    /// A map lease granted on `ino`, or why not.
    fn mapped(
        leases: &Leases,
        peer: &Peer,
        client: &mut UnixStream,
        ino: u64,
        writable: bool,
    ) -> Result<u64, Refusal> {
        leases.grant_map(peer, (1, ino), (0, 16), writable).unwrap();
        match wire::recv(client).unwrap() {
            Some(Msg::Mapped { lease, runs, .. }) => {
                assert_eq!(runs.len(), 1);
                Ok(lease)
            }
            Some(Msg::Refused { why, .. }) => Err(why),
            other => panic!("expected an answer, got {other:?}"),
        }
    }

    #[test]
    fn map_leases_share_a_file_and_a_kernel_read_recalls_them() {
        let (leases, peer, mut client, owner) = with_owner(Duration::from_secs(30));
        let a = mapped(&leases, &peer, &mut client, 7, true).unwrap();
        let b = mapped(&leases, &peer, &mut client, 7, false).unwrap();
        granted(&leases, &peer, &mut client, 7);
        // A write lease would move the mapped blocks.
        let write = asked(&leases, &peer, &mut client, 7, true);
        assert_eq!(write, Err(Refusal::Busy));
        assert!(leases.writes_held(peer.id));
        // Attributes need no recall: a mapping changes no size or time.
        assert!(matches!(leases.settle_writes(7), Ok(None)));
        // Data does: every lease on the file is recalled.
        let l = Arc::clone(&leases);
        let reading = std::thread::spawn(move || l.settle_reads(7).map(|g| g.is_some()));
        for _ in 0..3 {
            let Some(Msg::Recall { ino, lease }) = wire::recv(&mut client).unwrap() else {
                panic!("expected a recall");
            };
            leases.give_back(peer.id, ino, lease, LeaseEnd::Returned);
        }
        assert!(matches!(reading.join().unwrap(), Ok(true)));
        let mut ended = owner.unmapped.lock().clone();
        ended.sort_unstable();
        assert_eq!(ended, [amber_core::MapId(0), amber_core::MapId(1)]);
        assert!(!leases.writes_held(peer.id));
        // With no lease out, reads and getattrs take no lock again.
        assert_eq!(leases.maps_out.load(Ordering::Acquire), 0);
        assert_eq!(leases.writes_out.load(Ordering::Acquire), 0);
        let _ = (a, b);
    }

    #[test]
    fn a_map_lease_waits_for_a_write_lease_and_goes_when_its_client_leaves() {
        let (leases, peer, mut client, owner) = with_owner(Duration::from_secs(30));
        asked(&leases, &peer, &mut client, 5, true).unwrap();
        assert_eq!(
            mapped(&leases, &peer, &mut client, 5, false),
            Err(Refusal::Busy)
        );
        // Refused before the owner pinned anything.
        assert_eq!(owner.mapped.load(Ordering::Relaxed), 0);
        mapped(&leases, &peer, &mut client, 6, true).unwrap();
        leases.leave(peer.id);
        assert_eq!(*owner.unmapped.lock(), [amber_core::MapId(0)]);
        assert_eq!(leases.held(), 0);
        assert!(leases.state.lock().files.is_empty());
    }
}
