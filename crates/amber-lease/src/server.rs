//! The daemon's lease socket (design.md §17.2): who may connect, and one
//! thread per client reading its requests. A client is admitted only if
//! it could already read the pool file (uid 0 or the pool's owner) and
//! the daemon may signal it (the last resort of a recall).

use std::io::{self, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use amber_core::data::LeaseEnd;
use parking_lot::Mutex;

use crate::closes::Closes;
use crate::table::{Leases, Peer};
use crate::wire::{self, Msg, Welcome, VERSION};

/// Most clients connected at once; later ones use the kernel's path.
pub const MAX_CLIENTS: usize = 1024;
/// How long a new client has to say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(2);
/// A client thread's stack: it settles files through the core.
const CLIENT_STACK: usize = 256 << 10;

/// What every client thread shares.
struct Shared {
    leases: Arc<Leases>,
    closes: Closes,
    welcome: Welcome,
    pool_owner: u32,
    clients: AtomicUsize,
    next_id: AtomicU64,
}

/// The listening socket; stops accepting, ends every connection and
/// removes the socket when dropped.
pub struct LeaseServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    shared: Arc<Shared>,
}

impl LeaseServer {
    /// Listens on `socket` (replacing one a killed daemon left): clients
    /// are welcomed with `welcome` and granted leases from `leases`.
    /// The socket is open to every user (mode 0666); admission is by the
    /// peer's credentials.
    pub fn start(
        socket: &Path,
        welcome: Welcome,
        pool_owner: u32,
        leases: Arc<Leases>,
    ) -> io::Result<LeaseServer> {
        let _ = std::fs::remove_file(socket);
        let listener = UnixListener::bind(socket)?;
        std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o666))?;
        let shared = Arc::new(Shared {
            leases,
            closes: Closes::new()?,
            welcome,
            pool_owner,
            clients: AtomicUsize::new(0),
            next_id: AtomicU64::new(1),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let (stopping, sh) = (Arc::clone(&stop), Arc::clone(&shared));
        let thread = std::thread::Builder::new()
            .name("amberfs-leases".into())
            .spawn(move || accept(&listener, &stopping, &sh))?;
        Ok(LeaseServer {
            path: socket.to_path_buf(),
            stop,
            thread: Some(thread),
            shared,
        })
    }

    /// The socket's path, as clients are told it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The count of closes on the mount that clients read: the FUSE
    /// adapter advances it on every FUSE_FLUSH.
    pub fn closes(&self) -> Closes {
        self.shared.closes.clone()
    }
}

impl Drop for LeaseServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = UnixStream::connect(&self.path);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.shared.leases.end_all();
        let _ = std::fs::remove_file(&self.path);
    }
}

fn accept(listener: &UnixListener, stop: &AtomicBool, shared: &Arc<Shared>) {
    for conn in listener.incoming() {
        if stop.load(Ordering::Acquire) {
            return;
        }
        let Ok(conn) = conn else { continue };
        let Some((pid, pidfd)) = admitted(&conn, shared.pool_owner) else {
            continue;
        };
        if shared.clients.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
            shared.clients.fetch_sub(1, Ordering::AcqRel);
            continue;
        }
        let sh = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name("amberfs-lessee".into())
            .stack_size(CLIENT_STACK)
            .spawn(move || {
                let _ = serve(conn, &sh, pid, pidfd);
                sh.clients.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            shared.clients.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// The peer's pid and a pidfd for it if it may be a client: it can read
/// the pool file already (root or the pool's owner) and this daemon may
/// signal it (root, or the same user).
fn admitted(conn: &UnixStream, pool_owner: u32) -> Option<(i32, Option<std::os::fd::OwnedFd>)> {
    let cred = rustix::net::sockopt::socket_peercred(conn).ok()?;
    let (uid, me) = (cred.uid.as_raw(), rustix::process::geteuid().as_raw());
    if !(uid == 0 || uid == pool_owner) || !(me == 0 || me == uid) {
        return None;
    }
    let pidfd = rustix::process::pidfd_open(cred.pid, rustix::process::PidfdFlags::empty()).ok();
    Some((cred.pid.as_raw_nonzero().get(), pidfd))
}

/// One client's connection: hello, then requests until it ends.
fn serve(
    conn: UnixStream,
    sh: &Shared,
    pid: i32,
    pidfd: Option<std::os::fd::OwnedFd>,
) -> io::Result<()> {
    conn.set_read_timeout(Some(HELLO_TIMEOUT))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    match wire::recv(&mut reader)? {
        Some(Msg::Hello { version }) if version == VERSION => {}
        _ => return Ok(()),
    }
    let mut w = conn.try_clone()?;
    wire::send(&mut w, &Msg::Welcome(sh.welcome.clone()))?;
    sh.closes.send(&conn)?;
    conn.set_read_timeout(None)?;
    let id = sh.next_id.fetch_add(1, Ordering::Relaxed);
    let peer = Arc::new(Peer {
        id,
        writer: Mutex::new(w),
        pidfd,
        pid,
        ender: conn,
    });
    sh.leases.join(Arc::clone(&peer));
    let served = requests(&mut reader, &peer, sh);
    if sh.leases.writes_held(id) {
        wait_gone(&peer);
    }
    sh.leases.leave(id);
    served
}

/// Waits until a client whose connection ended with write leases out is
/// dead, so no store of its lands after the verifier read its grants:
/// one that still lives lost its connection without dying (the daemon
/// ended it), so it is killed. Bounded: past twice the recall timeout
/// (a process the kernel cannot kill), the grants are adopted anyway and
/// the log says so.
fn wait_gone(peer: &Peer) {
    let Some(fd) = &peer.pidfd else {
        crate::log(format_args!(
            "process {} left with write leases and no pidfd to see it die",
            peer.pid
        ));
        return;
    };
    let dead = |ms: i32| {
        let mut p = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)];
        let t = rustix::event::Timespec {
            tv_sec: i64::from(ms / 1000),
            tv_nsec: i64::from(ms % 1000) * 1_000_000,
        };
        matches!(rustix::event::poll(&mut p, Some(&t)), Ok(n) if n > 0)
    };
    if dead(100) {
        return;
    }
    let _ = rustix::process::pidfd_send_signal(fd, rustix::process::Signal::KILL);
    let bound = i32::try_from(2 * crate::RECALL_TIMEOUT.as_millis()).unwrap_or(i32::MAX);
    if !dead(bound) {
        crate::log(format_args!(
            "process {} did not die after SIGKILL; adopting its writes anyway",
            peer.pid
        ));
    }
}

/// Reads the client's requests until it goes; anything unexpected ends
/// the connection (the client then reads through the kernel).
fn requests(reader: &mut impl io::Read, peer: &Peer, sh: &Shared) -> io::Result<()> {
    loop {
        match wire::recv(reader)? {
            Some(Msg::Ask {
                seq,
                ino,
                window,
                write,
            }) => {
                sh.leases.grant(peer, seq, (ino, window), write)?;
            }
            Some(Msg::MapAsk {
                seq,
                ino,
                first,
                blocks,
                writable,
            }) => {
                sh.leases
                    .grant_map(peer, (seq, ino), (first, blocks), writable)?;
            }
            Some(Msg::Return { ino, lease } | Msg::Recalled { ino, lease }) => {
                sh.leases.give_back(peer.id, ino, lease, LeaseEnd::Returned);
            }
            Some(Msg::Maps { seq, ino }) => sh.leases.note_mapper(peer, seq, ino)?,
            _ => return Ok(()),
        }
    }
}
