//! `amberfs mount`: serve a pool at a directory through FUSE.
//!
//! Everything that can be checked without the kernel is checked first, in
//! the calling process, so that a typo, a missing or corrupt pool, a pool
//! already in use or a busy mount point is reported on the terminal and
//! nothing is touched. Then, unless `--foreground`, the command starts
//! itself again with `--foreground` as a daemon (re-exec rather than fork:
//! no unsafe code, and the daemon is a fresh process with one thread
//! model), waits until the kernel lists the mount, and reports.
//!
//! The daemon writes a pid file (`/run/amberfs/`, else `/tmp/amberfs/`)
//! and removes it only after the pool was unmounted cleanly, which is what
//! `amberfs umount` waits for; beside it, a control socket `amberfs stats`
//! reads the live counters from (`control.rs`).

use std::fs::{self, File};
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use amber_core::fs::read_superblock;
use amber_core::FsError;
use amber_format::PoolState;
use amber_fuse::{session_config, DEFAULT_THREADS};
use amber_pmem::PmDevice;
use amber_pmem::{MapError, MapOptions, MmapDevice};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use super::fstab;
use crate::common::{
    map_error, mount_pool, pool_error, warn, CliError, CliResult, MountConfig, PoolFs, Shown,
};
use crate::control::ControlSocket;
use crate::daemon_log;
use crate::output::{note, outln};

/// How long the starting process waits for the daemon's mount to appear.
const MOUNT_WAIT: Duration = Duration::from_secs(10);
/// Polling interval of the waits here and in `umount`.
pub const POLL: Duration = Duration::from_millis(20);
/// Lines of a failed daemon's log shown on the terminal.
const LOG_TAIL: usize = 20;

#[derive(clap::Args)]
pub struct Args {
    /// The pool file or device.
    pool: PathBuf,
    /// The directory to mount it at.
    dir: PathBuf,
    /// Serve in this process until unmounted (SIGTERM, SIGINT or SIGHUP unmount)
    /// instead of starting a daemon.
    #[arg(long)]
    foreground: bool,
    /// Threads serving FUSE requests.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_THREADS, value_parser = parse_threads)]
    threads: usize,
    /// The daemon's log (default /tmp/amberfs-<pool name>-<pid>.log).
    #[arg(long, value_name = "FILE", conflicts_with = "foreground")]
    log: Option<PathBuf>,
}

fn parse_threads(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n @ 1..=64) => Ok(n),
        _ => Err(format!("{text:?} is not a thread count from 1 to 64")),
    }
}

pub fn run(args: Args, emulate: Option<&str>, options: Option<&str>) -> CliResult<ExitCode> {
    let options = options.unwrap_or("");
    let split = fstab::split(options);
    let config = MountConfig::parse(emulate, Some(&split.core))?;
    let dir = check_mount_point(&args.dir)?;
    let pool = check_pool(&args.pool, config.read_only())?;
    if args.foreground {
        serve(&pool, &dir, &config, args.threads, &split.kernel)
    } else {
        start_daemon(&args, &pool, &dir, emulate, options)
    }
}

/// `mount.fuse.amberfs POOL DIR -o OPTIONS` (fstab.rs): a daemon with
/// the default threads and log.
pub fn mount_from_helper(pool: &Path, dir: &Path, options: &str) -> CliResult<ExitCode> {
    let args = Args {
        pool: pool.to_path_buf(),
        dir: dir.to_path_buf(),
        foreground: false,
        threads: DEFAULT_THREADS,
        log: None,
    };
    run(args, None, Some(options))
}

/// `path` made absolute with its directories resolved but not its last
/// component: stat'ing the mount point of a dead FUSE daemon fails
/// (ENOTCONN), and that is exactly the mount `umount` must still handle.
pub fn absolute(path: &Path) -> CliResult<PathBuf> {
    let fail = |e: std::io::Error| CliError::new(format!("cannot resolve {}: {e}", path.shown()));
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => {
            let parent = if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            };
            Ok(parent.canonicalize().map_err(fail)?.join(name))
        }
        _ => path.canonicalize().map_err(fail),
    }
}

/// Checks the mount point: absolute, an existing directory, nothing
/// mounted on it yet.
fn check_mount_point(dir: &Path) -> CliResult<PathBuf> {
    let shown = dir.shown();
    let abs = absolute(dir).map_err(|_| {
        CliError::new(format!(
            "mount point {shown} does not exist — create it with 'mkdir -p {shown}'"
        ))
    })?;
    if let Some(m) = mounted_at(&abs)? {
        return Err(CliError::new(format!(
            "mount point {shown} is busy: {} ({}) is mounted there — unmount it first{}",
            m.source,
            m.fstype,
            if m.is_amberfs() {
                format!(" with 'amberfs umount {shown}'")
            } else {
                String::new()
            }
        )));
    }
    match fs::metadata(&abs) {
        Ok(m) if m.is_dir() => Ok(abs),
        Ok(_) => Err(CliError::new(format!(
            "mount point {shown} is not a directory — mount at a directory"
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(CliError::new(format!(
            "mount point {shown} does not exist — create it with 'mkdir -p {shown}'"
        ))),
        Err(e) => Err(CliError::new(format!(
            "cannot use mount point {shown}: {e}"
        ))),
    }
}

/// Checks that the pool opens (read-only for `-o ro`), is not in use, and
/// has a valid superblock, without writing to it; returns its absolute
/// path. A pool that cannot be opened for writing is refused by name,
/// with the `-o ro` that mounts it.
fn check_pool(pool: &Path, read_only: bool) -> CliResult<PathBuf> {
    let opened = match read_only {
        true => MmapDevice::open_read_only(pool, &MapOptions::default()),
        false => MmapDevice::open(pool, &MapOptions::default()),
    };
    let dev = match opened {
        Ok(dev) => dev,
        Err(e @ MapError::InUse { .. }) => {
            // The usual holder is an amberfs mount: name it, it is the
            // one thing the user needs to know.
            let held = pool.canonicalize().ok().and_then(|p| mount_of_pool(&p));
            return Err(match held {
                Some(at) => CliError::new(format!(
                    "pool {} is already mounted at {at} — unmount it first with \
                     'amberfs umount {at}'",
                    pool.shown()
                )),
                None => map_error(pool, e),
            });
        }
        Err(e) => return Err(map_error(pool, e)),
    };
    let sb = read_superblock(&dev).map_err(|e| pool_error(pool, e))?;
    if read_only && sb.state != PoolState::Clean {
        return Err(pool_error(pool, FsError::NeedsRecovery));
    }
    pool.canonicalize()
        .map_err(|e| CliError::new(format!("cannot resolve {}: {e}", pool.shown())))
}

/// One line of /proc/self/mountinfo, the fields used here.
pub struct MountEntry {
    pub fstype: String,
    pub source: String,
}

impl MountEntry {
    /// Whether amberfs mounted it: FUSE, with the source `amberfs:POOL`.
    pub fn is_amberfs(&self) -> bool {
        (self.fstype == "fuse" || self.fstype.starts_with("fuse."))
            && self.source.starts_with("amberfs:")
    }

    /// The pool named in the source.
    pub fn pool(&self) -> Option<&str> {
        self.source.strip_prefix("amberfs:")
    }
}

/// Where the amberfs mount of `pool` (an absolute path) is, if any.
pub fn mount_of_pool(pool: &Path) -> Option<String> {
    let table = fs::read_to_string("/proc/self/mountinfo").ok()?;
    table
        .lines()
        .filter_map(parse_mountinfo)
        .find(|(_, m)| m.is_amberfs() && m.pool().map(Path::new) == Some(pool))
        .map(|(at, _)| at)
}

/// What is mounted at `dir` (the topmost mount if several are stacked).
pub fn mounted_at(dir: &Path) -> CliResult<Option<MountEntry>> {
    let table = fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| CliError::new(format!("cannot read /proc/self/mountinfo: {e}")))?;
    let want = dir.as_os_str().as_encoded_bytes();
    Ok(table
        .lines()
        .filter_map(parse_mountinfo)
        .fold(
            None,
            |top, (at, m)| {
                if at.as_bytes() == want {
                    Some(m)
                } else {
                    top
                }
            },
        ))
}

/// Mount point and entry of one mountinfo line: `ID PARENT MAJ:MIN ROOT
/// MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS`.
fn parse_mountinfo(line: &str) -> Option<(String, MountEntry)> {
    let (left, right) = line.split_once(" - ")?;
    let at = unescape(left.split(' ').nth(4)?);
    let mut r = right.split(' ');
    let fstype = unescape(r.next()?);
    let source = unescape(r.next()?);
    Some((at, MountEntry { fstype, source }))
}

/// Undoes mountinfo's octal escapes (`\040` for a space, and so on).
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let code = b.get(i + 1..i + 4).and_then(|d| {
            let s = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(s, 8).ok()
        });
        match (b[i], code) {
            (b'\\', Some(c)) => {
                out.push(c);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where the daemon serving `dir` keeps its pid file: under /run (gone at
/// reboot, with the mounts), else /tmp. `umount` looks in both.
pub fn pid_file_candidates(dir: &Path) -> [PathBuf; 2] {
    let name = format!("{}.pid", escape(dir));
    [
        Path::new("/run/amberfs").join(&name),
        Path::new("/tmp/amberfs").join(&name),
    ]
}

/// A mount point as one file name: bytes other than letters, digits,
/// '.', '-' and '_' as %XX; a path too long for a file name is hashed.
fn escape(dir: &Path) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for &b in dir.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || b"._-".contains(&b) {
            s.push(b as char);
        } else {
            // Writing to a String cannot fail.
            let _ = write!(s, "%{b:02X}");
        }
    }
    if s.len() > 200 {
        use std::hash::{Hash, Hasher};
        // DefaultHasher::new() has fixed keys: the same path always maps
        // to the same name, in the daemon and in `umount`.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        dir.hash(&mut h);
        s = format!("{}-{:016x}", &s[s.len() - 100..], h.finish());
    }
    s
}

/// The daemon's pid file, removed when dropped (after the pool was
/// unmounted, or when mounting failed).
struct PidFile(PathBuf);

impl PidFile {
    /// Writes `pid\npool\n` to the first candidate directory that works.
    fn create(dir: &Path, pool: &Path) -> CliResult<PidFile> {
        let text = format!("{}\n{}\n", std::process::id(), pool.shown());
        let mut last = None;
        for path in pid_file_candidates(dir) {
            let parent = path.parent().expect("pid files live in a directory");
            match fs::create_dir_all(parent).and_then(|()| fs::write(&path, &text)) {
                Ok(()) => return Ok(PidFile(path)),
                Err(e) => last = Some((path, e)),
            }
        }
        let (path, e) = last.expect("two candidates were tried");
        Err(CliError::new(format!(
            "cannot write pid file {}: {e}",
            path.shown()
        )))
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_file(&self.0) {
            log(&format!("cannot remove pid file {}: {e}", self.0.shown()));
        }
    }
}

/// A line of the daemon's log.
fn log(message: &str) {
    daemon_log::line(message);
}

/// Why the serving loop stops.
enum Stop {
    Signal(i32),
    SessionEnded,
}

/// `--foreground`: mount and serve until unmounted or signalled, then
/// mark the pool clean.
fn serve(
    pool: &Path,
    dir: &Path,
    config: &MountConfig,
    threads: usize,
    kernel_flags: &[fuser::MountOption],
) -> CliResult<ExitCode> {
    daemon_log::install();
    // Registered before mounting, so a signal that arrives during the
    // mount unmounts cleanly instead of killing us with the pool dirty.
    // SIGHUP too: a terminal closing under a --foreground mount ends it
    // cleanly rather than killing it with the pool dirty.
    let signals = Signals::new([SIGTERM, SIGINT, SIGHUP])
        .map_err(|e| CliError::new(format!("cannot catch SIGTERM, SIGINT and SIGHUP: {e}")))?;
    let pid_file = PidFile::create(dir, pool)?;
    let (fs, report) = mount_pool(pool, config)?;
    log(&format!("{}: {report}", pool.shown()));
    log_counters(&fs, "at mount");
    let (adapter, leasing) = crate::leasing::adapter(&fs, pool, config);
    let session_options = session_options(pool, config, threads, kernel_flags);
    let session = match fuser::Session::new(adapter, dir, &session_options) {
        Ok(s) => s,
        Err(e) => {
            drop(leasing);
            let clean = fs.unmount();
            drop(pid_file);
            return Err(CliError::new(format!(
                "cannot mount {} at {}: {e}{}",
                pool.shown(),
                dir.shown(),
                match clean {
                    Ok(()) => String::new(),
                    Err(u) => format!("; and the pool could not be marked clean: {u}"),
                }
            )));
        }
    };
    if let Some((leases, _)) = &leasing {
        crate::leasing::drop_cached_on_write_grants(leases, &session);
    }
    log(&format!(
        "mounted {} at {} ({threads} thread(s){})",
        pool.shown(),
        dir.shown(),
        if config.read_only() {
            ", read-only"
        } else {
            ""
        }
    ));
    let leases = leasing.as_ref().map(|(l, _)| Arc::clone(l));
    let control = start_control(&fs, pool, dir, report.to_string(), leases);
    let served = run_until_stopped(session, signals, dir);
    drop(control);
    drop(leasing);
    if let Err(e) = served {
        // A worker that failed (or panicked) may have stopped inside an
        // operation; marking the pool clean would skip the recovery that
        // makes that safe, so it is left for the next mount to recover.
        drop(pid_file);
        return Err(CliError::new(format!(
            "the FUSE session ended with an error: {e}; pool {} was not marked clean, \
             the next mount recovers it",
            pool.shown()
        )));
    }
    log_counters(&fs, "at unmount");
    let clean = fs.unmount();
    drop(pid_file);
    match clean {
        Ok(()) => {
            log(&format!("{} unmounted cleanly", pool.shown()));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Err(CliError::new(format!(
            "could not unmount pool {} cleanly: {e}; the next mount will recover it",
            pool.shown()
        ))),
    }
}

/// amber-fuse's session configuration with this mount's kernel flags.
fn session_options(
    pool: &Path,
    config: &MountConfig,
    threads: usize,
    kernel_flags: &[fuser::MountOption],
) -> fuser::Config {
    let fsname = format!("amberfs:{}", pool.shown());
    let mut options = session_config(&fsname, threads);
    options.mount_options.extend(kernel_flags.iter().cloned());
    if config.read_only() {
        // The kernel then refuses every change itself (EROFS), as for
        // any read-only mount; the core refuses what still arrives.
        options.mount_options.push(fuser::MountOption::RO);
    }
    if config.noatime() {
        // The core already moves no atime; the kernel's mount table then
        // says so too.
        options.mount_options.push(fuser::MountOption::NoAtime);
    }
    options
}

/// The control socket `amberfs stats` reads the live counters from; a
/// mount without one still serves (said in the log).
fn start_control(
    fs: &PoolFs,
    pool: &Path,
    dir: &Path,
    opened: String,
    leases: Option<Arc<amber_lease::Leases>>,
) -> Option<ControlSocket> {
    let core = fs.core().clone();
    let session = super::stats::Session {
        pool: pool.to_path_buf(),
        dir: dir.to_path_buf(),
        opened,
        since: std::time::Instant::now(),
        leases,
    };
    let stats = move || super::stats::snapshot(&core, &session);
    ControlSocket::start(dir, stats)
        .inspect_err(|e| log(&format!("no live statistics: {e}")))
        .ok()
}

/// Logs the policy's counters: at mount its calibration (hinfs: L_dram,
/// L_pm, whether buffering pays on this device), so a user can see what
/// the model works with; at unmount what the session did, with the PM
/// writes and fences (`amberfs stats` shows them while it runs).
fn log_counters(fs: &PoolFs, when: &str) {
    let stats = fs.core().policy_stats();
    if !stats.is_empty() {
        let shown: Vec<String> = stats.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let pm = fs.core().device().stats();
        log(&format!(
            "policy {} {when}: {} (PM: {} bytes written, {} lines flushed, {} fences)",
            fs.core().options().policy,
            shown.join(" "),
            pm.bytes_written(),
            pm.lines_flushed,
            pm.fences
        ));
    }
}

/// Serves `session` on its own thread until the kernel ends it (an
/// unmount) or a signal arrives, which unmounts `dir` (or detaches it
/// while busy); returns how the session ended.
fn run_until_stopped<FS: fuser::Filesystem + Send + 'static>(
    mut session: fuser::Session<FS>,
    mut signals: Signals,
    dir: &Path,
) -> std::io::Result<()> {
    let mut unmounter = session.unmount_callable();
    let (tx, rx) = mpsc::channel();
    let ended = tx.clone();
    let runner = thread::spawn(move || {
        let result = session.run();
        // The receiver only goes away when the process is ending anyway.
        let _ = ended.send(Stop::SessionEnded);
        result
    });
    let signal_handle = signals.handle();
    thread::spawn(move || {
        for sig in signals.forever() {
            if tx.send(Stop::Signal(sig)).is_err() {
                break;
            }
        }
    });
    match rx.recv() {
        Ok(Stop::Signal(sig)) => {
            let name = match sig {
                SIGTERM => "SIGTERM",
                SIGINT => "SIGINT",
                _ => "SIGHUP",
            };
            log(&format!("{name}: unmounting {}", dir.shown()));
            if let Err(e) = unmounter.unmount() {
                log(&format!(
                    "{} is busy ({e}); detaching it: the pool is unmounted when the last \
                     file open there is closed",
                    dir.shown()
                ));
                detach(dir);
            }
        }
        Ok(Stop::SessionEnded) | Err(_) => log(&format!("{} was unmounted", dir.shown())),
    }
    let served = runner
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("the FUSE session panicked")));
    signal_handle.close();
    served
}

/// Lazily detaches a busy mount (umount -l): the kernel ends the session
/// once nothing uses the mount any more.
fn detach(dir: &Path) {
    match Command::new("umount").arg("-l").arg(dir).output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => log(&format!(
            "umount -l {} failed: {}",
            dir.shown(),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => log(&format!("cannot run umount -l {}: {e}", dir.shown())),
    }
}

/// Starts `amberfs mount --foreground` as a daemon and waits until its
/// mount appears.
fn start_daemon(
    args: &Args,
    pool: &Path,
    dir: &Path,
    emulate: Option<&str>,
    options: &str,
) -> CliResult<ExitCode> {
    let log_path = match &args.log {
        Some(p) => p.clone(),
        None => {
            let name = pool
                .file_name()
                .map_or("pool".into(), |n| n.to_string_lossy());
            std::env::temp_dir().join(format!("amberfs-{name}-{}.log", std::process::id()))
        }
    };
    let log_err =
        |e: std::io::Error| CliError::new(format!("cannot write log {}: {e}", log_path.shown()));
    let log_file = File::create(&log_path).map_err(log_err)?;
    let exe = std::env::current_exe()
        .map_err(|e| CliError::new(format!("cannot find the amberfs executable: {e}")))?;
    let mut cmd = Command::new(exe);
    cmd.arg("mount")
        .arg(pool)
        .arg(dir)
        .arg("--foreground")
        .arg("--threads")
        .arg(args.threads.to_string());
    if let Some(e) = emulate {
        cmd.arg("--emulate").arg(e);
    }
    if !options.is_empty() {
        cmd.arg("-o").arg(options);
    }
    // Its own process group: a Ctrl-C meant for the shell that started it
    // must not reach the daemon. "/" as working directory: it must not
    // keep the directory it was started from busy.
    cmd.current_dir("/")
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().map_err(log_err)?)
        .stderr(log_file)
        .process_group(0);
    let mut child = cmd
        .spawn()
        .map_err(|e| CliError::new(format!("cannot start the mount daemon: {e}")))?;
    wait_for_mount(&mut child, pool, dir, &log_path)
}

fn wait_for_mount(child: &mut Child, pool: &Path, dir: &Path, log: &Path) -> CliResult<ExitCode> {
    let started = Instant::now();
    while started.elapsed() < MOUNT_WAIT {
        if let Some(status) = child
            .try_wait()
            .map_err(|e| CliError::new(format!("cannot watch the mount daemon: {e}")))?
        {
            for line in log_tail(log) {
                note(format_args!("{line}"));
            }
            return Err(CliError::new(format!(
                "could not mount {} at {}: the daemon exited ({status}); its log is {}",
                pool.shown(),
                dir.shown(),
                log.shown()
            )));
        }
        if mounted_at(dir)?.is_some_and(|m| m.is_amberfs()) {
            // The last session did not end cleanly: say so here, where the
            // user looks, as the offline commands do.
            for line in log_tail(log) {
                if let Some((_, report)) = line.split_once("]: ") {
                    if report.contains("recovered after a crash") {
                        warn(report);
                    }
                }
            }
            outln!(
                "mounted {} at {} (pid {}, log {})",
                pool.shown(),
                dir.shown(),
                child.id(),
                log.shown()
            )?;
            return Ok(ExitCode::SUCCESS);
        }
        thread::sleep(POLL);
    }
    // Stopped rather than left to mount later behind the user's back.
    let stopped = child.kill().and_then(|()| child.wait());
    Err(CliError::new(format!(
        "{} did not appear as a mount within {} s; {}; see {}",
        dir.shown(),
        MOUNT_WAIT.as_secs(),
        match stopped {
            Ok(_) => "the daemon was stopped".to_string(),
            Err(e) => format!("the daemon (pid {}) could not be stopped: {e}", child.id()),
        },
        log.shown()
    )))
}

/// The last lines of a log, for showing why a daemon died.
fn log_tail(log: &Path) -> Vec<String> {
    let Ok(f) = File::open(log) else {
        return Vec::new();
    };
    let lines: Vec<String> = BufReader::new(f).lines().map_while(Result::ok).collect();
    lines[lines.len().saturating_sub(LOG_TAIL)..].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines() {
        let line = "36 35 0:52 / /mnt/with\\040space rw,nosuid,nodev shared:1 - fuse \
                    amberfs:/p/a.pool rw,user_id=0,group_id=0,default_permissions,allow_other";
        let (at, m) = parse_mountinfo(line).unwrap();
        assert_eq!(at, "/mnt/with space");
        assert!(m.is_amberfs());
        assert_eq!(m.pool(), Some("/p/a.pool"));
        let (_, ext) = parse_mountinfo("1 0 8:1 / / rw - ext4 /dev/sda1 rw").unwrap();
        assert!(!ext.is_amberfs());
        assert!(parse_mountinfo("garbage").is_none());
    }

    #[test]
    fn pid_file_names() {
        assert_eq!(escape(Path::new("/mnt/a b")), "%2Fmnt%2Fa%20b");
        let long = PathBuf::from(format!("/{}", "x".repeat(300)));
        let name = escape(&long);
        assert!(name.len() < 200);
        assert_eq!(name, escape(&long));
    }

    #[test]
    fn thread_counts() {
        assert_eq!(parse_threads("4"), Ok(4));
        assert!(parse_threads("0").is_err());
        assert!(parse_threads("x").is_err());
    }
}
