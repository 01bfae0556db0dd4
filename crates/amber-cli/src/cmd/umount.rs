//! `amberfs umount`: unmount a mounted pool and wait until its daemon has
//! marked the pool clean, so that a script may use the pool (fsck, copy,
//! mount again) as soon as the command returns.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::thread;
use std::time::{Duration, Instant};

use amber_core::fs::read_superblock;
use amber_format::PoolState;

use super::mount::{absolute, mounted_at, pid_file_candidates, POLL};
use crate::common::{open_device, warn, CliError, CliResult, Shown};
use crate::output::outln;

/// How long to wait for the daemon to mark the pool clean and exit.
const DAEMON_WAIT: Duration = Duration::from_secs(30);

#[derive(clap::Args)]
pub struct Args {
    /// The directory the pool is mounted at.
    dir: PathBuf,
}

pub fn run(args: Args) -> CliResult<ExitCode> {
    unmount_dir(&args.dir)
}

/// Unmounts `dir` and waits for its daemon (also as umount(8)'s helper,
/// `umount.fuse.amberfs`).
pub fn unmount_dir(dir: &Path) -> CliResult<ExitCode> {
    let shown = dir.shown();
    let dir = absolute(dir)?;
    let Some(m) = mounted_at(&dir)? else {
        return Err(CliError::new(format!("{shown} is not mounted")));
    };
    if !m.is_amberfs() {
        return Err(CliError::new(format!(
            "{shown} is not an amberfs mount ({} from {}); unmount it with umount(8)",
            m.fstype, m.source
        )));
    }
    let pool = m.pool().map(PathBuf::from);
    let daemon = read_pid_file(&dir);
    unmount(&dir, &shown.to_string())?;
    let Some((pid, pid_file)) = daemon else {
        outln!("unmounted {shown} (no daemon pid file: not waiting for the pool to be closed)")?;
        return Ok(ExitCode::SUCCESS);
    };
    let exit = wait_for_daemon(pid, &pid_file)?;
    // The superblock is the proof; a pool already opened again (or
    // removed) cannot be read, and then the daemon's exit is the word.
    let dirty = pool.as_deref().and_then(pool_state) == Some(PoolState::Dirty);
    if matches!(exit, Exit::Clean) && !dirty {
        outln!("unmounted {shown}; the pool is closed and clean")?;
    } else {
        outln!(
            "unmounted {shown}, but daemon {pid} did not close the pool cleanly (see its log); \
             the next mount recovers it"
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The daemon's pid and pid file, if one was written for `dir`.
fn read_pid_file(dir: &Path) -> Option<(u32, PathBuf)> {
    pid_file_candidates(dir).into_iter().find_map(|path| {
        let text = fs::read_to_string(&path).ok()?;
        let pid = text.lines().next()?.trim().parse().ok()?;
        Some((pid, path))
    })
}

/// Unmounts through util-linux `umount`, or fusermount where that is what
/// the system has (an unprivileged user's mount).
fn unmount(dir: &Path, shown: &str) -> CliResult<()> {
    let tries: [(&str, &[&str]); 3] = [
        // -i: not through umount.fuse.amberfs, which is this command.
        ("umount", &["-i"]),
        ("fusermount3", &["-u"]),
        ("fusermount", &["-u"]),
    ];
    for (tool, flags) in tries {
        match Command::new(tool).args(flags).arg(dir).output() {
            Ok(out) if out.status.success() => return Ok(()),
            Ok(out) => {
                return Err(CliError::new(format!(
                    "cannot unmount {shown}: {} — close the files open there (`fuser -vm {shown}` \
                     lists the processes), or detach it now with `umount -l {shown}`",
                    String::from_utf8_lossy(&out.stderr).trim()
                )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(CliError::new(format!("cannot run {tool}: {e}"))),
        }
    }
    Err(CliError::new(
        "cannot unmount: neither umount nor fusermount is installed",
    ))
}

/// How the daemon ended.
enum Exit {
    /// It removed its pid file: it unmounted the pool first.
    Clean,
    /// It was gone and had left its pid file (killed).
    Died,
}

fn wait_for_daemon(pid: u32, pid_file: &Path) -> CliResult<Exit> {
    let started = Instant::now();
    while started.elapsed() < DAEMON_WAIT {
        if !pid_file.exists() {
            return Ok(Exit::Clean);
        }
        if !is_daemon(pid) {
            // Nobody else removes it: a stale file would name a pid that
            // may be reused.
            if let Err(e) = fs::remove_file(pid_file) {
                warn(format!("cannot remove stale {}: {e}", pid_file.shown()));
            }
            return Ok(Exit::Died);
        }
        thread::sleep(POLL);
    }
    Err(CliError::new(format!(
        "unmounted, but daemon {pid} is still running after {} s (closing the pool); \
         wait for it before using the pool",
        DAEMON_WAIT.as_secs()
    )))
}

/// Whether `pid` is still an amberfs mount daemon (and not a process that
/// reused the number).
fn is_daemon(pid: u32) -> bool {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| c.split(|&b| b == 0).any(|a| a == b"--foreground"))
        .unwrap_or(false)
}

/// The pool's state as its superblock says, read without writing; None if
/// it cannot be read (in use again already, or gone).
fn pool_state(pool: &Path) -> Option<PoolState> {
    let dev = open_device(pool).ok()?;
    read_superblock(&dev).ok().map(|sb| sb.state)
}
