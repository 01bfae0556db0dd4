//! A running daemon's control socket: `amberfs stats` reads the pool's
//! live counters from it without stopping the daemon. The socket lives
//! beside the daemon's pid file (`mount::pid_file_candidates`, `.sock`
//! for `.pid`) and is as private as it (mode 0600: its owner, or root).
//! One request a connection, one line each way: `stats` is answered with
//! one JSON object. Requests are bounded (a line of at most 64 bytes,
//! read within a second), served one at a time on one thread.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::cmd::mount::pid_file_candidates;
use crate::common::{CliError, CliResult, Shown};

/// The longest request line read.
const MAX_REQUEST: u64 = 64;
/// The longest answer read (the counters are a few KiB).
const MAX_ANSWER: u64 = 1 << 20;
/// How long a peer has to send its request, or to read the answer.
const PEER_TIMEOUT: Duration = Duration::from_secs(1);

/// Where the daemon serving `dir` may listen, in the order it tries.
pub fn socket_candidates(dir: &Path) -> [PathBuf; 2] {
    pid_file_candidates(dir).map(|p| p.with_extension("sock"))
}

/// The daemon's listening socket; stops serving and removes it when
/// dropped.
pub struct ControlSocket {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ControlSocket {
    /// Listens for the daemon serving `dir`; `stats` answers a `stats`
    /// request (one JSON object).
    pub fn start(
        dir: &Path,
        stats: impl Fn() -> serde_json::Value + Send + 'static,
    ) -> CliResult<ControlSocket> {
        let (path, listener) = bind(dir)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("amberfs-control".into())
            .spawn(move || serve(&listener, &stopping, &stats))
            .map_err(|e| CliError::new(format!("cannot start the control thread: {e}")))?;
        Ok(ControlSocket {
            path,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wakes the accept; the thread then sees the flag.
        let _ = UnixStream::connect(&self.path);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Binds the first candidate that works, replacing a socket a killed
/// daemon left behind (the caller holds the mount point, so no live
/// daemon serves it).
fn bind(dir: &Path) -> CliResult<(PathBuf, UnixListener)> {
    let mut last = None;
    for path in socket_candidates(dir) {
        let parent = path.parent().expect("sockets live in a directory");
        let _ = std::fs::remove_file(&path);
        let bound = std::fs::create_dir_all(parent)
            .and_then(|()| UnixListener::bind(&path))
            .and_then(|l| {
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
                Ok(l)
            });
        match bound {
            Ok(l) => return Ok((path, l)),
            Err(e) => last = Some((path, e)),
        }
    }
    let (path, e) = last.expect("two candidates were tried");
    Err(CliError::new(format!(
        "cannot listen on {}: {e}",
        path.shown()
    )))
}

fn serve(listener: &UnixListener, stop: &AtomicBool, stats: &dyn Fn() -> serde_json::Value) {
    for conn in listener.incoming() {
        if stop.load(Ordering::Acquire) {
            return;
        }
        if let Ok(conn) = conn {
            // A peer that misbehaves loses its answer, nothing else.
            let _ = answer(conn, stats);
        }
    }
}

fn answer(conn: UnixStream, stats: &dyn Fn() -> serde_json::Value) -> std::io::Result<()> {
    conn.set_read_timeout(Some(PEER_TIMEOUT))?;
    conn.set_write_timeout(Some(PEER_TIMEOUT))?;
    let mut line = String::new();
    BufReader::new((&conn).take(MAX_REQUEST)).read_line(&mut line)?;
    let reply = match line.trim() {
        "stats" => stats(),
        other => serde_json::json!({ "error": format!("unknown request {other:?}") }),
    };
    let mut conn = conn;
    writeln!(conn, "{reply}")
}

/// Sends `request` to the daemon serving `dir` and returns its answer.
pub fn query(dir: &Path, request: &str) -> CliResult<serde_json::Value> {
    let mut tried = Vec::new();
    for path in socket_candidates(dir) {
        match UnixStream::connect(&path) {
            Ok(conn) => return exchange(conn, request, &path),
            Err(e) => tried.push(format!("{}: {e}", path.shown())),
        }
    }
    Err(CliError::new(format!(
        "no daemon answers for {} ({}); is it mounted by this version of amberfs?",
        dir.shown(),
        tried.join("; ")
    )))
}

fn exchange(mut conn: UnixStream, request: &str, path: &Path) -> CliResult<serde_json::Value> {
    let fail = |e: &dyn std::fmt::Display| CliError::new(format!("{}: {e}", path.shown()));
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| fail(&e))?;
    writeln!(conn, "{request}").map_err(|e| fail(&e))?;
    let mut line = String::new();
    BufReader::new(conn.take(MAX_ANSWER))
        .read_line(&mut line)
        .map_err(|e| fail(&e))?;
    let v: serde_json::Value = serde_json::from_str(&line).map_err(|e| fail(&e))?;
    match v.get("error").and_then(serde_json::Value::as_str) {
        Some(e) => Err(fail(&e)),
        None => Ok(v),
    }
}
