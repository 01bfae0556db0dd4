//! `amberfs mount` as a user runs it: the real binary mounts a pool in the
//! kernel, and std::fs and the usual command-line tools use it. These need
//! root and /dev/fuse; without them each test says "skipped" and passes.
//! Every mount is owned by a guard that detaches it even when a test
//! fails, so a failure never leaves a dead mount behind.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, UNIX_EPOCH};

use tempfile::TempDir;

fn can_mount() -> bool {
    let root = fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    if !(root && Path::new("/dev/fuse").exists()) {
        eprintln!("skipped: needs root and /dev/fuse");
        return false;
    }
    true
}

fn amberfs<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_amberfs"))
        .args(args)
        .output()
        .expect("run amberfs")
}

fn ok<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> String {
    let out = amberfs(args);
    assert!(
        out.status.success(),
        "amberfs {:?} failed: {}",
        args.iter().map(|a| a.as_ref()).collect::<Vec<_>>(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Expects exit status 1 with an `amberfs:` message; returns it.
fn fails<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> String {
    let out = amberfs(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "expected failure: {err}");
    assert!(err.contains("amberfs: "), "unprefixed message: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    err
}

fn has_tool(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Whether a test that needs root, /dev/fuse and `tools` (from Debian's
/// `package`) cannot run here; says why if so.
fn cannot_run(tools: &[&str], package: &str) -> bool {
    if !can_mount() {
        return true;
    }
    let missing: Vec<&str> = tools.iter().copied().filter(|t| !has_tool(t)).collect();
    if !missing.is_empty() {
        eprintln!(
            "skipped: {} (package {package}) not installed",
            missing.join(", ")
        );
    }
    !missing.is_empty()
}

fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().expect(cmd);
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether an amberfs FUSE mount is at `dir`.
fn is_mounted(dir: &Path) -> bool {
    let table = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let want = dir.to_str().unwrap();
    table
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(want) && l.contains(" - fuse amberfs:"))
}

/// A fresh pool and a mount point in a temporary directory, and the
/// mount options its mounts take.
struct Setup {
    tmp: TempDir,
    pool: PathBuf,
    dir: PathBuf,
    options: Vec<&'static str>,
}

impl Setup {
    /// mkfs's and mount's defaults: the split layout, policy amber.
    fn new() -> Setup {
        Setup::made_with(&[], vec![])
    }

    /// A classic pool mounted with `direct`, for what only the block-map
    /// policies do (fallocate).
    fn classic() -> Setup {
        Setup::made_with(&["--layout", "classic"], vec!["-o", "policy=direct"])
    }

    fn made_with(mkfs_flags: &[&str], options: Vec<&'static str>) -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let pool = tmp.path().join("t.pool");
        let dir = tmp.path().join("mnt");
        fs::create_dir(&dir).unwrap();
        ok(&[
            &["mkfs", pool.to_str().unwrap(), "--size", "64M"],
            mkfs_flags,
        ]
        .concat());
        Setup {
            tmp,
            pool,
            dir,
            options,
        }
    }

    fn p(&self) -> &str {
        self.pool.to_str().unwrap()
    }

    fn d(&self) -> &str {
        self.dir.to_str().unwrap()
    }

    /// Mounts; returns a guard and the daemon's pid and log.
    fn mount(&self) -> (Mounted, u32, PathBuf) {
        let log = self.tmp.path().join("daemon.log");
        let mount = ["mount", self.p(), self.d(), "--log", log.to_str().unwrap()];
        let out = ok(&[&mount[..], &self.options].concat());
        let guard = Mounted(self.dir.clone());
        assert!(is_mounted(&self.dir), "not in mountinfo after: {out}");
        let pid = out
            .split("(pid ")
            .nth(1)
            .and_then(|r| r.split(',').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no pid in {out:?}"));
        (guard, pid, log)
    }

    fn fsck_clean(&self) {
        let out = amberfs(&["fsck", self.p()]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "fsck: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn at(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// Detaches the mount when dropped if it is still there (a failed test).
struct Mounted(PathBuf);

impl Mounted {
    /// Unmounts through amberfs, which waits for the pool to be closed.
    fn umount(self) {
        let out = ok(&["umount", self.0.to_str().unwrap()]);
        assert!(out.contains("clean"), "{out}");
        assert!(!is_mounted(&self.0));
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if is_mounted(&self.0) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

/// Waits (bounded) until `pid` has exited.
fn wait_gone(pid: u32) {
    let start = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(start.elapsed() < Duration::from_secs(10), "pid {pid} lives");
        std::thread::sleep(Duration::from_millis(20));
    }
}

// Tests are exempt from the 80-line limit: a scenario reads top to bottom.
#[allow(clippy::too_many_lines)]
#[test]
fn posix_operations_through_the_mount() {
    if !can_mount() {
        return;
    }
    let s = Setup::new();
    let (m, _, _) = s.mount();

    // Create, write, read, append.
    fs::write(s.at("a.txt"), b"hello").unwrap();
    let mut f = OpenOptions::new().append(true).open(s.at("a.txt")).unwrap();
    f.write_all(b" world").unwrap();
    f.sync_all().unwrap();
    drop(f);
    assert_eq!(fs::read(s.at("a.txt")).unwrap(), b"hello world");
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(s.at("a.txt"))
        .unwrap();
    f.seek(SeekFrom::Start(6)).unwrap();
    f.write_all(b"WORLD").unwrap();
    let mut back = String::new();
    f.seek(SeekFrom::Start(0)).unwrap();
    f.read_to_string(&mut back).unwrap();
    assert_eq!(back, "hello WORLD");
    drop(f);
    let big: Vec<u8> = (0..3 << 20).map(|i: u32| (i % 251) as u8).collect();
    fs::write(s.at("big"), &big).unwrap();
    assert_eq!(fs::read(s.at("big")).unwrap(), big);

    // Directories, with "." and ".." in a listing.
    fs::create_dir_all(s.at("d/e")).unwrap();
    for i in 0..300 {
        File::create(s.at(&format!("d/f{i:03}"))).unwrap();
    }
    let names: Vec<String> = fs::read_dir(s.at("d"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 301);
    let ls = run("ls", &["-a", s.at("d").to_str().unwrap()]);
    let ls: Vec<&str> = ls.lines().collect();
    assert_eq!(&ls[..2], [".", ".."]);
    assert_eq!(ls.len(), 303);
    assert_eq!(fs::metadata(s.at("d")).unwrap().nlink(), 3);
    assert!(fs::remove_dir(s.at("d")).is_err(), "non-empty rmdir");

    // Rename, also over an existing file.
    fs::write(s.at("b.txt"), b"bee").unwrap();
    fs::rename(s.at("a.txt"), s.at("d/e/a.txt")).unwrap();
    fs::rename(s.at("b.txt"), s.at("d/e/a.txt")).unwrap();
    assert_eq!(fs::read(s.at("d/e/a.txt")).unwrap(), b"bee");
    assert!(!s.at("b.txt").exists());

    // Hard links and link counts.
    fs::hard_link(s.at("d/e/a.txt"), s.at("link")).unwrap();
    assert_eq!(fs::metadata(s.at("link")).unwrap().nlink(), 2);
    assert_eq!(
        fs::metadata(s.at("link")).unwrap().ino(),
        fs::metadata(s.at("d/e/a.txt")).unwrap().ino()
    );
    fs::remove_file(s.at("link")).unwrap();
    assert_eq!(fs::metadata(s.at("d/e/a.txt")).unwrap().nlink(), 1);

    // Symlinks.
    std::os::unix::fs::symlink("d/e/a.txt", s.at("sym")).unwrap();
    assert_eq!(
        fs::read_link(s.at("sym")).unwrap(),
        PathBuf::from("d/e/a.txt")
    );
    assert_eq!(fs::read(s.at("sym")).unwrap(), b"bee");

    // chmod, chown, truncate, times.
    fs::set_permissions(s.at("big"), fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::chown(s.at("big"), Some(1234), Some(5678)).unwrap();
    let md = fs::metadata(s.at("big")).unwrap();
    assert_eq!(
        (md.mode() & 0o7777, md.uid(), md.gid()),
        (0o640, 1234, 5678)
    );
    let f = OpenOptions::new().write(true).open(s.at("big")).unwrap();
    f.set_len(1000).unwrap();
    let when = UNIX_EPOCH + Duration::new(1_600_000_000, 123_456_789);
    f.set_times(fs::FileTimes::new().set_modified(when).set_accessed(when))
        .unwrap();
    drop(f);
    let md = fs::metadata(s.at("big")).unwrap();
    assert_eq!(md.len(), 1000);
    assert_eq!(md.modified().unwrap(), when);
    assert_eq!(md.accessed().unwrap(), when);

    // An unlinked file lives while it is open.
    let mut open = File::open(s.at("d/e/a.txt")).unwrap();
    fs::remove_file(s.at("d/e/a.txt")).unwrap();
    let mut kept = Vec::new();
    open.read_to_end(&mut kept).unwrap();
    assert_eq!(kept, b"bee");
    drop(open);

    // Other users: the kernel checks permissions (default_permissions)
    // and files they create are theirs (allow_other lets them in).
    if has_tool("setpriv") {
        fs::set_permissions(&s.dir, fs::Permissions::from_mode(0o777)).unwrap();
        let as_nobody = |script: &str| {
            Command::new("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .args(["sh", "-c", script])
                .stderr(Stdio::null())
                .status()
                .unwrap()
                .success()
        };
        let big = s.at("big");
        assert!(!as_nobody(&format!("echo x >> {}", big.display())));
        assert!(as_nobody(&format!("echo x > {}", s.at("theirs").display())));
        let md = fs::metadata(s.at("theirs")).unwrap();
        assert_eq!((md.uid(), md.gid()), (65534, 65534));
    }

    // Extended attributes.
    if has_tool("setfattr") && has_tool("getfattr") {
        let f = s.at("d/f000");
        let f = f.to_str().unwrap();
        run("setfattr", &["-n", "user.color", "-v", "blue", f]);
        run("setfattr", &["-n", "trusted.k", "-v", "v", f]);
        let got = run("getfattr", &["-n", "user.color", "--only-values", f]);
        assert_eq!(got, "blue");
        let all = run("getfattr", &["-d", "-m", "-", f]);
        assert!(all.contains("user.color=\"blue\""), "{all}");
        assert!(all.contains("trusted.k=\"v\""), "{all}");
        run("setfattr", &["-x", "user.color", f]);
        let gone = Command::new("getfattr")
            .args(["-n", "user.color", f])
            .output()
            .unwrap();
        assert!(!gone.status.success());
        assert!(String::from_utf8_lossy(&gone.stderr).contains("No such attribute"));
    } else {
        eprintln!("skipped the xattr part: setfattr/getfattr (package attr) not installed");
    }

    // fallocate under amber: holes filled with zeroed blocks and holes
    // punched (no reservation: every write goes out of place); the
    // classic pools' test below covers keep-size and SEEK_DATA.
    if has_tool("fallocate") {
        let p = s.at("pre");
        let ps = p.to_str().unwrap();
        run("fallocate", &["-l", "1MiB", ps]);
        let md = fs::metadata(&p).unwrap();
        assert_eq!(md.len(), 1 << 20);
        assert!(md.blocks() >= (1 << 20) / 512, "{} blocks", md.blocks());
        assert!(fs::read(&p).unwrap().iter().all(|&b| b == 0));
        let mut f = OpenOptions::new().write(true).open(&p).unwrap();
        f.write_all(&[7u8; 3 * 4096]).unwrap();
        f.sync_all().unwrap();
        drop(f);
        run(
            "fallocate",
            &["--punch-hole", "-o", "100", "-l", "8000", ps],
        );
        let got = fs::read(&p).unwrap();
        assert!(got[..100].iter().all(|&b| b == 7));
        assert!(got[100..8100].iter().all(|&b| b == 0));
        assert!(got[8100..3 * 4096].iter().all(|&b| b == 7));
        assert_eq!(got.len(), 1 << 20);
    }

    // statfs.
    let df = run("df", &["-B1", "--output=source,size,avail", s.d()]);
    let line = df.lines().nth(1).unwrap();
    assert!(line.starts_with(&format!("amberfs:{}", s.p())), "{df}");
    let size: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(size > 60 << 20 && size <= 64 << 20, "{df}");

    m.umount();
    s.fsck_clean();

    // Everything is still there on the next mount.
    let (m, _, _) = s.mount();
    assert_eq!(
        fs::read(s.at("sym")).unwrap_err().kind(),
        std::io::ErrorKind::NotFound
    );
    assert_eq!(fs::metadata(s.at("big")).unwrap().len(), 1000);
    assert_eq!(fs::metadata(s.at("big")).unwrap().modified().unwrap(), when);
    assert_eq!(fs::read_dir(s.at("d")).unwrap().count(), 301);
    assert_eq!(
        fs::read(s.at("d/e/a.txt")).unwrap_err().kind(),
        std::io::ErrorKind::NotFound
    );
    m.umount();
    s.fsck_clean();
}

/// fallocate through the mount on a classic pool (`direct`): allocate,
/// keep-size, punch a hole; SEEK_DATA/SEEK_HOLE; kept across a remount.
#[test]
fn fallocate_and_seek_through_the_mount() {
    if cannot_run(&["fallocate"], "util-linux") {
        return;
    }
    let s = Setup::classic();
    let (m, _, _) = s.mount();
    let f = s.at("pre");
    let p = f.to_str().unwrap();
    run("fallocate", &["-l", "1MiB", p]);
    let md = fs::metadata(&f).unwrap();
    // Data blocks, plus the block-map nodes that index them.
    assert_eq!(md.len(), 1 << 20);
    assert!((2048..2048 + 64).contains(&md.blocks()), "{}", md.blocks());
    run("fallocate", &["--keep-size", "-o", "1MiB", "-l", "1MiB", p]);
    let md = fs::metadata(&f).unwrap();
    assert_eq!(md.len(), 1 << 20);
    assert!((4096..4096 + 64).contains(&md.blocks()), "{}", md.blocks());
    fs::write(&f, vec![7u8; 1 << 20]).unwrap();
    run(
        "fallocate",
        &["--punch-hole", "-o", "64KiB", "-l", "64KiB", p],
    );
    let holed = |data: &[u8]| {
        data.len() == 1 << 20
            && data[65536..131072].iter().all(|&b| b == 0)
            && data[..65536].iter().all(|&b| b == 7)
            && data[131072..].iter().all(|&b| b == 7)
    };
    assert!(holed(&fs::read(&f).unwrap()));
    if has_tool("xfs_io") {
        let hole = run("xfs_io", &["-c", "seek -h 0", p]);
        assert!(hole.contains("65536"), "{hole}");
        let next = run("xfs_io", &["-c", "seek -d 65536", p]);
        assert!(next.contains("131072"), "{next}");
    }
    m.umount();
    s.fsck_clean();
    let (m, _, _) = s.mount();
    assert!(holed(&fs::read(&f).unwrap()));
    m.umount();
    s.fsck_clean();
}

#[test]
fn sigterm_and_kill_dash_nine() {
    if !can_mount() {
        return;
    }
    let s = Setup::new();

    // SIGTERM: the daemon unmounts and marks the pool clean.
    let (m, pid, log) = s.mount();
    fs::write(s.at("kept"), b"before the signal").unwrap();
    run("kill", &["-TERM", &pid.to_string()]);
    wait_gone(pid);
    assert!(!is_mounted(&s.dir));
    let text = fs::read_to_string(&log).unwrap();
    assert!(text.contains("SIGTERM: unmounting"), "{text}");
    assert!(text.contains("unmounted cleanly"), "{text}");
    drop(m);
    let fsck = ok(&["fsck", s.p()]);
    assert!(fsck.contains("cleanly unmounted"), "{fsck}");

    // kill -9: the pool stays dirty, the dead mount is detached, and the
    // next mount recovers.
    let (m, pid, _) = s.mount();
    let mut f = File::create(s.at("synced")).unwrap();
    f.write_all(b"durable").unwrap();
    f.sync_all().unwrap();
    drop(f);
    run("kill", &["-KILL", &pid.to_string()]);
    wait_gone(pid);
    run("umount", &["-l", s.d()]);
    drop(m);
    let log = s.tmp.path().join("after-kill.log");
    let mount = amberfs(&["mount", s.p(), s.d(), "--log", log.to_str().unwrap()]);
    assert!(mount.status.success(), "{mount:?}");
    let m = Mounted(s.dir.clone());
    let said = String::from_utf8_lossy(&mount.stderr);
    assert!(said.contains("recovered after a crash"), "{said}");
    assert_eq!(fs::read(s.at("synced")).unwrap(), b"durable");
    assert_eq!(fs::read(s.at("kept")).unwrap(), b"before the signal");
    m.umount();
    s.fsck_clean();
}

#[test]
fn foreground_serves_until_sigint() {
    if !can_mount() {
        return;
    }
    let s = Setup::new();
    let child = Command::new(env!("CARGO_BIN_EXE_amberfs"))
        .args(["mount", s.p(), s.d(), "--foreground", "--threads", "4"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let m = Mounted(s.dir.clone());
    let start = Instant::now();
    while !is_mounted(&s.dir) {
        assert!(start.elapsed() < Duration::from_secs(10), "no mount");
        std::thread::sleep(Duration::from_millis(20));
    }
    fs::write(s.at("f"), b"x").unwrap();
    run("kill", &["-INT", &child.id().to_string()]);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("SIGINT: unmounting"), "{err}");
    assert!(!is_mounted(&s.dir));
    drop(m);
    s.fsck_clean();
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    if !can_mount() {
        return;
    }
    let s = Setup::new();
    // Should a refusal mount after all, the mount is still cleaned up.
    let _cleanup = Mounted(s.dir.clone());
    let bytes = fs::read(&s.pool).unwrap();

    let missing = s.tmp.path().join("missing.pool");
    let err = fails(&["mount", missing.to_str().unwrap(), s.d()]);
    assert!(err.contains("no such file"), "{err}");

    let corrupt = s.tmp.path().join("corrupt.pool");
    let mut junk = bytes.clone();
    // Both superblock copies: one bad copy alone is survived.
    junk[..8192].fill(0xA5);
    fs::write(&corrupt, &junk).unwrap();
    let err = fails(&["mount", corrupt.to_str().unwrap(), s.d()]);
    assert!(err.contains("not an Amber pool"), "{err}");
    assert_eq!(fs::read(&corrupt).unwrap(), junk);

    let file = s.tmp.path().join("plain");
    fs::write(&file, b"").unwrap();
    let err = fails(&["mount", s.p(), file.to_str().unwrap()]);
    assert!(err.contains("not a directory"), "{err}");
    let err = fails(&["mount", s.p(), s.tmp.path().join("nodir").to_str().unwrap()]);
    assert!(err.contains("does not exist"), "{err}");
    let err = fails(&["mount", s.p(), s.d(), "-o", "bogus"]);
    assert!(err.contains("unknown mount option"), "{err}");
    assert!(!is_mounted(&s.dir));
    assert_eq!(fs::read(&s.pool).unwrap(), bytes, "refusals wrote the pool");

    let err = fails(&["umount", s.d()]);
    assert!(err.contains("is not mounted"), "{err}");
    let err = fails(&["umount", "/proc"]);
    assert!(err.contains("not an amberfs mount"), "{err}");

    // A busy mount point, and a pool another daemon serves.
    let (m, _, _) = s.mount();
    let other = s.tmp.path().join("other.pool");
    ok(&["mkfs", other.to_str().unwrap(), "--size", "64M"]);
    let other_bytes = fs::read(&other).unwrap();
    let err = fails(&["mount", other.to_str().unwrap(), s.d()]);
    assert!(err.contains("is busy"), "{err}");
    assert_eq!(fs::read(&other).unwrap(), other_bytes);
    let second = s.tmp.path().join("second");
    fs::create_dir(&second).unwrap();
    let err = fails(&["mount", s.p(), second.to_str().unwrap()]);
    assert!(err.contains("already mounted at"), "{err}");
    assert!(!is_mounted(&second));
    m.umount();
    s.fsck_clean();
}

/// fuser's own warnings (here: a request the adapter does not implement,
/// copy_file_range, which std::fs::copy tries first) reach the daemon's
/// log through the logger the daemon installs.
#[test]
fn fuser_warnings_reach_the_daemon_log() {
    if !can_mount() {
        return;
    }
    let s = Setup::new();
    let (m, _, log) = s.mount();
    fs::write(s.at("a"), b"copied").unwrap();
    fs::copy(s.at("a"), s.at("b")).unwrap();
    assert_eq!(fs::read(s.at("b")).unwrap(), b"copied");
    m.umount();
    let text = fs::read_to_string(&log).unwrap();
    let warned = text
        .lines()
        .find(|l| l.contains("[Not Implemented] copy_file_range"))
        .unwrap_or_else(|| panic!("no fuser warning in the log:\n{text}"));
    assert!(warned.contains(" amberfs["), "{warned}");
    assert!(warned.contains("WARN fuser"), "{warned}");
    s.fsck_clean();
}

/// Slots of the file `killed_while_writing` writes, one write range each.
const SLOTS: u64 = 48;
/// Bytes per slot.
const SLOT: u64 = 64 << 10;
/// The file's bytes before any write.
const OLD: u8 = 0xFF;

/// The range write number `k` covers, the same in every round: in slot
/// `k mod SLOTS`, 40,000 to 48,000 bytes from 924 to 3,924 bytes into a
/// page (issue 15: 40,000 bytes at 110,420), so the write starts and ends
/// in partial pages.
fn range_of(k: u64) -> (u64, usize) {
    let i = k % SLOTS;
    let off = i * SLOT + 3_924 - (i * 131 % 3_000);
    (off, 40_000 + (i * 577 % 8_000) as usize)
}

/// Write number `k`'s bytes: `k` as a little-endian u32, repeated.
fn bytes_of(k: u64, len: usize) -> Vec<u8> {
    (k as u32)
        .to_le_bytes()
        .into_iter()
        .cycle()
        .take(len)
        .collect()
}

/// Which write a slot's range shows (None: the old bytes); fails if it
/// mixes writes, or old and new bytes.
fn landed(file: &[u8], slot: u64, writes: u64) -> Option<u64> {
    let (off, len) = range_of(slot);
    let got = &file[off as usize..off as usize + len];
    if got.iter().all(|&b| b == OLD) {
        return None;
    }
    let k = u64::from(u32::from_le_bytes(got[..4].try_into().unwrap()));
    if !(k % SLOTS == slot && k < writes && got == bytes_of(k, len)) {
        // Every write of the slot covers its range with the same phase.
        let mut runs: Vec<(usize, u32)> = Vec::new();
        for (at, w) in got.chunks_exact(4).enumerate() {
            let w = u32::from_le_bytes(w.try_into().unwrap());
            if runs.last().is_none_or(|&(_, last)| last != w) {
                runs.push((at * 4, w));
            }
        }
        panic!("slot {slot} ({len} bytes at {off}) is torn: (offset, write) runs {runs:x?}");
    }
    Some(k)
}

/// Writes rounds of `range_of` writes (fsync after each round) in a
/// thread, kills the daemon with SIGKILL in the second round, remounts
/// and checks that every slot shows one whole write or none, no older
/// than what returned (`durable_on_return`) or was fsync'd.
fn killed_while_writing(s: &Setup, durable_on_return: bool) {
    use std::os::unix::fs::FileExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    const ROUNDS: u64 = 1_000;
    let (m, _, _) = s.mount();
    let f = File::create(s.at("f")).unwrap();
    f.write_all_at(&vec![OLD; (SLOTS * SLOT) as usize], 0)
        .unwrap();
    f.sync_all().unwrap();
    drop(f);
    // A fresh mount: nothing of the file in the kernel's page cache.
    m.umount();
    let (m, pid, _) = s.mount();
    let done = Arc::new(AtomicU64::new(0));
    let synced = Arc::new(AtomicU64::new(0));
    let (d, sy, path) = (done.clone(), synced.clone(), s.at("f"));
    let writer = std::thread::spawn(move || {
        let f = OpenOptions::new().write(true).open(path).unwrap();
        for k in 0..ROUNDS * SLOTS {
            let (off, len) = range_of(k);
            if !matches!(f.write_at(&bytes_of(k, len), off), Ok(n) if n == len) {
                return;
            }
            d.store(k + 1, Ordering::SeqCst);
            if (k + 1) % SLOTS == 0 {
                if f.sync_all().is_err() {
                    return;
                }
                sy.store(k + 1, Ordering::SeqCst);
            }
        }
    });
    let start = Instant::now();
    while done.load(Ordering::SeqCst) < SLOTS + SLOTS / 2 {
        assert!(start.elapsed() < Duration::from_secs(60), "writer stuck");
        std::thread::sleep(Duration::from_millis(1));
    }
    run("kill", &["-KILL", &pid.to_string()]);
    wait_gone(pid);
    writer.join().unwrap();
    run("umount", &["-l", s.d()]);
    drop(m);
    let (returned, fsynced) = (done.load(Ordering::SeqCst), synced.load(Ordering::SeqCst));
    let (m, _, _) = s.mount();
    let file = fs::read(s.at("f")).unwrap();
    assert_eq!(file.len() as u64, SLOTS * SLOT);
    let mut inside = vec![false; file.len()];
    for slot in 0..SLOTS {
        let (off, len) = range_of(slot);
        inside[off as usize..off as usize + len].fill(true);
    }
    let stray = (0..file.len()).find(|&x| !inside[x] && file[x] != OLD);
    assert_eq!(stray, None, "a byte no write covers changed");
    let floor = if durable_on_return { returned } else { fsynced };
    for slot in 0..SLOTS {
        // The write in flight at the kill (number `returned`) may be there.
        let got = landed(&file, slot, returned + 1);
        // The newest write of this slot the floor covers must be there
        // (or a newer one).
        let want = (0..floor).rev().find(|k| k % SLOTS == slot);
        assert!(
            got >= want,
            "slot {slot}: shows write {got:?}, but write {want:?} was durable \
             ({returned} writes returned, {fsynced} fsync'd)"
        );
    }
    m.umount();
    s.fsck_clean();
}

/// Under the policies whose every write(2) is atomic, a write(2) through
/// the mount is all old or all new after the daemon is killed while
/// writing. `amber` keeps its queued metadata until fsync here
/// (`hunter_interval=never`), so a write the kernel split, whose first
/// partial page went through the zone (durable) and the rest into the
/// data log (queued), showed that first piece alone every time.
#[test]
fn writes_stay_atomic_across_kill_dash_nine() {
    if !can_mount() {
        return;
    }
    let amber = Setup::made_with(&[], vec!["-o", "hunter_interval=never"]);
    killed_while_writing(&amber, false);
    let cow = Setup::made_with(&["--layout", "classic"], vec!["-o", "policy=cow"]);
    killed_while_writing(&cow, true);
}

/// Files under an atomic policy are opened for direct I/O (one write(2),
/// one request); shared mappings still work: stores through a mapping
/// reach the file at msync, a write(2) shows in a mapping made before it,
/// a program on the mount runs, and the daemon's log states the bound.
/// Runs a program this test process just wrote. Another test's thread
/// may fork while the copy's descriptor is open (before its exec closes
/// it), and the kernel then refuses the exec with ETXTBSY for as long as
/// that child lives: retried for up to 5 s.
fn exec_fresh(path: &std::path::Path) -> std::process::ExitStatus {
    /// Linux's "text file busy".
    const ETXTBSY: i32 = 26;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match Command::new(path).status() {
            Err(e) if e.raw_os_error() == Some(ETXTBSY) && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            r => return r.unwrap_or_else(|e| panic!("exec {}: {e}", path.display())),
        }
    }
}

#[test]
fn mmap_and_exec_with_direct_io() {
    if cannot_run(&["xfs_io"], "xfsprogs") {
        return;
    }
    let s = Setup::new();
    let (m, _, log) = s.mount();
    let f = s.at("f");
    let p = f.to_str().unwrap();
    fs::write(&f, vec![b'.'; 10_000]).unwrap();
    let ops = [
        "mmap -rw 0 8192",
        "mwrite -S 0x61 100 5000",
        "msync -s 0 8192",
    ];
    let args: Vec<&str> = ops.iter().flat_map(|c| ["-c", *c]).chain([p]).collect();
    run("xfs_io", &args);
    let want = |data: &[u8]| {
        data.len() == 10_000
            && data[..100].iter().all(|&b| b == b'.')
            && data[100..5100].iter().all(|&b| b == b'a')
            && data[5100..].iter().all(|&b| b == b'.')
    };
    assert!(want(&fs::read(&f).unwrap()));
    let seen = run(
        "xfs_io",
        &[
            "-c",
            "mmap -rw 0 8192",
            "-c",
            "mread 0 8",
            "-c",
            "pwrite -S 0x42 4 4",
        ]
        .into_iter()
        .chain(["-c", "mread -v 0 12", p])
        .collect::<Vec<_>>(),
    );
    assert!(
        seen.contains("2e 2e 2e 2e 42 42 42 42 2e 2e 2e 2e"),
        "{seen}"
    );
    fs::copy("/bin/true", s.at("true")).unwrap();
    fs::set_permissions(s.at("true"), fs::Permissions::from_mode(0o755)).unwrap();
    assert!(exec_fresh(&s.at("true")).success());
    m.umount();
    let text = fs::read_to_string(&log).unwrap();
    assert!(text.contains("is one request, and atomic"), "{text}");
    let (m, _, _) = s.mount();
    let mut back = fs::read(&f).unwrap();
    assert_eq!(&back[4..8], b"BBBB");
    back[4..8].copy_from_slice(b"....");
    assert!(want(&back));
    m.umount();
    s.fsck_clean();
}

/// fallocate --zero-range through the mount, with and without keep-size,
/// under amber and under direct; kept across a remount. (Before: EOPNOTSUPP.)
#[test]
fn zero_range_through_the_mount() {
    if cannot_run(&["fallocate"], "util-linux") {
        return;
    }
    for (s, keeps_blocks_past_end) in [(Setup::new(), false), (Setup::classic(), true)] {
        let (m, _, _) = s.mount();
        let f = s.at("z");
        let p = f.to_str().unwrap();
        fs::write(&f, vec![7u8; 3 * 4096]).unwrap();
        run("fallocate", &["-z", "-o", "100", "-l", "8000", p]);
        run("fallocate", &["-z", "-o", "12000", "-l", "4000", p]);
        run("fallocate", &["-z", "-n", "-o", "64KiB", "-l", "64KiB", p]);
        let want = |data: &[u8]| {
            data.len() == 16_000
                && data[..100].iter().all(|&b| b == 7)
                && data[100..8100].iter().all(|&b| b == 0)
                && data[8100..12_000].iter().all(|&b| b == 7)
                && data[12_000..].iter().all(|&b| b == 0)
        };
        assert!(want(&fs::read(&f).unwrap()));
        // Keep-size allocated past the end (direct; amber's split layout
        // keeps no blocks there): 16 more blocks at least.
        if keeps_blocks_past_end {
            assert!(fs::metadata(&f).unwrap().blocks() >= (4 + 16) * 8);
        }
        m.umount();
        s.fsck_clean();
        let (m, _, _) = s.mount();
        assert!(want(&fs::read(&f).unwrap()));
        m.umount();
    }
}

/// Unmounts an overlay when dropped, before the amberfs mount under it.
struct Overlay(PathBuf);

impl Drop for Overlay {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// The mount as an overlayfs upper directory (containers): the kernel
/// requires RENAME_WHITEOUT of a FUSE upper layer (it refused the mount
/// before). Deleting a lower file leaves a whiteout (a character device
/// 0/0) in the upper directory; renaming one leaves a whiteout at its old
/// name; both stay after unmounting, with fsck clean.
#[test]
fn overlayfs_upper_directory() {
    use std::os::unix::fs::FileTypeExt;
    if !can_mount() {
        return;
    }
    let s = Setup::new();
    let (m, _, _) = s.mount();
    let (lower, merged) = (s.tmp.path().join("lower"), s.tmp.path().join("merged"));
    for d in [&lower, &merged] {
        fs::create_dir(d).unwrap();
    }
    fs::create_dir(s.at("upper")).unwrap();
    fs::create_dir(s.at("work")).unwrap();
    fs::write(lower.join("gone"), b"lower").unwrap();
    fs::write(lower.join("moved"), b"moved data").unwrap();
    let options = format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.display(),
        s.at("upper").display(),
        s.at("work").display()
    );
    run(
        "mount",
        &[
            "-t",
            "overlay",
            "overlay",
            "-o",
            &options,
            merged.to_str().unwrap(),
        ],
    );
    let overlay = Overlay(merged.clone());
    fs::remove_file(merged.join("gone")).unwrap();
    fs::rename(merged.join("moved"), merged.join("here")).unwrap();
    fs::write(merged.join("new"), b"upper").unwrap();
    let mut seen: Vec<String> = fs::read_dir(&merged)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    seen.sort();
    assert_eq!(seen, ["here", "new"]);
    assert_eq!(fs::read(merged.join("here")).unwrap(), b"moved data");
    drop(overlay);
    let whiteout = |name: &str| {
        let md = fs::symlink_metadata(s.at("upper").join(name)).unwrap();
        md.file_type().is_char_device() && md.rdev() == 0
    };
    assert!(whiteout("gone") && whiteout("moved"));
    assert_eq!(fs::read(s.at("upper/new")).unwrap(), b"upper");
    m.umount();
    s.fsck_clean();
    let (m, _, _) = s.mount();
    assert!(whiteout("gone") && whiteout("moved"));
    m.umount();
}

/// `lsattr` shows `name`'s flags: the first field of its output.
fn lsattr(path: &Path) -> String {
    let out = run("lsattr", &["-d", path.to_str().unwrap()]);
    out.split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Whether a removal failed with EPERM.
fn refused_dir(r: std::io::Result<()>) -> bool {
    r.is_err_and(|e| e.raw_os_error() == Some(1))
}

/// chattr and lsattr through the mount (they failed with ENOTTY):
/// immutable and append-only are shown, enforced, kept across a remount,
/// set only by root; other flags are refused.
#[test]
fn chattr_and_lsattr_through_the_mount() {
    use std::io::ErrorKind::PermissionDenied;
    if cannot_run(&["chattr", "lsattr"], "e2fsprogs") {
        return;
    }
    let s = Setup::new();
    let (m, _, _) = s.mount();
    let (f, d) = (s.at("f"), s.at("d"));
    fs::write(&f, b"kept").unwrap();
    fs::create_dir(&d).unwrap();
    // rmdir of a full directory inside a protected one: EPERM, as Linux
    // checks the flags before the entries (ENOTEMPTY before).
    fs::create_dir_all(d.join("full/sub")).unwrap();
    run("chattr", &["+a", d.to_str().unwrap()]);
    assert!(refused_dir(fs::remove_dir(d.join("full"))));
    run("chattr", &["-a", d.to_str().unwrap()]);
    fs::remove_dir_all(d.join("full")).unwrap();
    assert!(!lsattr(&f).contains(['i', 'a']), "{}", lsattr(&f));
    run("chattr", &["+i", f.to_str().unwrap()]);
    assert_eq!(lsattr(&f).find('i'), Some(4), "{}", lsattr(&f));
    let refused = |r: std::io::Result<()>| r.unwrap_err().kind() == PermissionDenied;
    assert!(refused(fs::write(&f, b"x")));
    assert!(refused(OpenOptions::new().append(true).open(&f).map(drop)));
    assert!(refused(fs::remove_file(&f)));
    assert!(refused(fs::rename(&f, s.at("g"))));
    assert!(refused(fs::hard_link(&f, s.at("h"))));
    assert_eq!(fs::read(&f).unwrap(), b"kept");
    run("chattr", &["-i", f.to_str().unwrap()]);
    run("chattr", &["+a", f.to_str().unwrap()]);
    assert_eq!(lsattr(&f).find('a'), Some(5), "{}", lsattr(&f));
    let mut app = OpenOptions::new().append(true).open(&f).unwrap();
    app.write_all(b" and more").unwrap();
    drop(app);
    assert!(refused(fs::write(&f, b"x")));
    run("chattr", &["+i", d.to_str().unwrap()]);
    assert!(refused(fs::write(d.join("n"), b"x")));
    // Other flags do not exist here; only root changes these two.
    let noatime = Command::new("chattr")
        .args(["+A"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(!noatime.status.success());
    if has_tool("setpriv") {
        fs::set_permissions(&s.dir, fs::Permissions::from_mode(0o777)).unwrap();
        let as_nobody = Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "chattr",
                "-a",
            ])
            .arg(&f)
            .output()
            .unwrap();
        assert!(!as_nobody.status.success());
    }
    m.umount();
    s.fsck_clean();
    let (m, _, _) = s.mount();
    assert_eq!(lsattr(&f).find('a'), Some(5), "{}", lsattr(&f));
    assert_eq!(lsattr(&d).find('i'), Some(4), "{}", lsattr(&d));
    assert_eq!(fs::read(&f).unwrap(), b"kept and more");
    run("chattr", &["-a", f.to_str().unwrap()]);
    run("chattr", &["-i", d.to_str().unwrap()]);
    fs::remove_file(&f).unwrap();
    fs::remove_dir(&d).unwrap();
    m.umount();
    s.fsck_clean();
}

/// A process's anonymous resident memory (heap), in bytes.
fn rss_anon(pid: u32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("RssAnon:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib << 10
}

/// The issue's `dd ... seek=$((2**36-1))` under the default policy: a
/// 4 KiB write at the last block a file can have succeeds and reads back,
/// the daemon's heap stays small (it used to abort asking for 512 GiB),
/// and a write past the largest file is EFBIG.
#[test]
fn a_write_at_the_largest_offset_through_the_mount() {
    if cannot_run(&["dd"], "coreutils") {
        return;
    }
    let s = Setup::new();
    let (m, pid, _) = s.mount();
    let f = s.at("f");
    let of = format!("of={}", f.display());
    let seek = format!("seek={}", (1u64 << 36) - 1);
    run("dd", &["if=/dev/zero", &of, "bs=4096", "count=1", &seek]);
    let last = (1u64 << 48) - 4096;
    assert_eq!(fs::metadata(&f).unwrap().len(), 1 << 48);
    let file = OpenOptions::new().read(true).write(true).open(&f).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, &[7u8; 4096], last).unwrap();
    let mut back = [0u8; 4096];
    std::os::unix::fs::FileExt::read_exact_at(&file, &mut back, last).unwrap();
    assert_eq!(back, [7u8; 4096]);
    let past = std::os::unix::fs::FileExt::write_at(&file, b"x", 1 << 48).unwrap_err();
    assert_eq!(past.raw_os_error(), Some(libc_efbig()), "{past}");
    file.sync_all().unwrap();
    let heap = rss_anon(pid);
    assert!(heap < 128 << 20, "the daemon holds {heap} bytes of heap");
    drop(file);
    fs::remove_file(&f).unwrap();
    m.umount();
    s.fsck_clean();
}

/// EFBIG, which std does not name.
fn libc_efbig() -> i32 {
    27
}

/// `df` counts a deleted file's space free as soon as `rm` returns, under
/// the default policy, whose queued metadata is persisted seconds later.
#[test]
fn df_shows_deleted_space_free_at_once() {
    if !can_mount() {
        return;
    }
    let s = Setup::new();
    let (m, _, _) = s.mount();
    let avail = || -> u64 {
        let df = run("df", &["-B1", "--output=avail", s.d()]);
        df.lines().nth(1).unwrap().trim().parse().unwrap()
    };
    let f = s.at("big");
    fs::write(&f, b"").unwrap();
    let empty = avail();
    fs::write(&f, vec![3u8; 32 << 20]).unwrap();
    assert!(avail() <= empty - (32 << 20), "{} of {empty}", avail());
    fs::remove_file(&f).unwrap();
    assert_eq!(avail(), empty, "right after rm");
    m.umount();
    s.fsck_clean();
}

/// `-o noatime` holds through the mount: a read that relatime lets move
/// atime (older than the last change) leaves it, and the kernel's mount
/// table says noatime; under the default the same read moves it.
#[test]
fn noatime_through_the_mount() {
    if !can_mount() {
        return;
    }
    let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000);
    for (options, moves) in [(vec!["-o", "noatime"], false), (vec![], true)] {
        let s = Setup::made_with(&[], options);
        let (m, _, _) = s.mount();
        fs::write(s.at("f"), b"data").unwrap();
        let f = OpenOptions::new().write(true).open(s.at("f")).unwrap();
        f.set_times(std::fs::FileTimes::new().set_accessed(old))
            .unwrap();
        drop(f);
        assert_eq!(fs::read(s.at("f")).unwrap(), b"data");
        // Past the adapter's 1 s attribute TTL, so stat asks the daemon.
        std::thread::sleep(std::time::Duration::from_millis(1_100));
        let atime = fs::metadata(s.at("f")).unwrap().accessed().unwrap();
        assert_eq!(atime != old, moves, "atime {atime:?} (moves: {moves})");
        let table = fs::read_to_string("/proc/self/mountinfo").unwrap();
        let line = table
            .lines()
            .find(|l| l.split(' ').nth(4) == Some(s.d()))
            .unwrap();
        assert_eq!(line.contains("noatime"), !moves, "{line}");
        drop(m);
    }
}

/// `amberfs stats` reads a running mount's counters from its daemon, by
/// mount directory or by pool, as text, JSON and a Prometheus textfile;
/// the log keeps the session's counters at unmount.
#[test]
fn stats_of_a_running_mount() {
    if !can_mount() {
        return;
    }
    let s = Setup::new();
    let (m, _, log) = s.mount();
    let mut f = fs::File::create(s.at("f")).unwrap();
    std::io::Write::write_all(&mut f, &vec![7u8; 1 << 20]).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let json: serde_json::Value = serde_json::from_str(&ok(&["stats", s.d(), "--json"])).unwrap();
    assert!(
        json["pm"]["bytes_written"].as_u64().unwrap() >= 1 << 20,
        "{json}"
    );
    assert!(json["pm"]["fences"].as_u64().unwrap() > 0, "{json}");
    assert_eq!(json["policy"], "amber");
    let space = &json["space"];
    assert!(
        space["blocks_free"].as_u64() < space["blocks"].as_u64(),
        "{json}"
    );
    assert!(json["policy_counters"]
        .as_object()
        .is_some_and(|c| !c.is_empty()));
    let text = ok(&["stats", s.p()]);
    assert!(
        text.contains("pm.fences ") && text.contains(" policy amber, mounted "),
        "{text}"
    );
    let prom = s.tmp.path().join("amberfs.prom");
    ok(&["stats", s.d(), "--prometheus", prom.to_str().unwrap()]);
    let prom = fs::read_to_string(&prom).unwrap();
    assert!(
        prom.contains("# TYPE amberfs_pm_fences_total counter\namberfs_pm_fences_total{pool="),
        "{prom}"
    );
    let err = fails(&["stats", s.tmp.path().to_str().unwrap()]);
    assert!(
        err.contains("neither an amberfs mount nor the pool of one"),
        "{err}"
    );
    m.umount();
    let err = fails(&["stats", s.p()]);
    assert!(err.contains("neither"), "{err}");
    let text = fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("policy amber at unmount: ") && text.contains(" fences)"),
        "{text}"
    );
}

/// `/sbin/mount.fuse.amberfs` pointing at this build while a test runs
/// (mount(8) looks for its helpers there only); removed after, unless
/// it was there before.
struct Helper(Option<PathBuf>);

impl Helper {
    fn install() -> Helper {
        let link = PathBuf::from("/sbin/mount.fuse.amberfs");
        if link.symlink_metadata().is_ok() {
            return Helper(None);
        }
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_amberfs"), &link).unwrap();
        Helper(Some(link))
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        if let Some(link) = &self.0 {
            let _ = fs::remove_file(link);
        }
    }
}

/// Waits (bounded) until the pool's superblock says clean.
fn wait_clean(pool: &str) {
    let start = Instant::now();
    while !amberfs(&["info", pool])
        .stdout
        .windows(5)
        .any(|w| w == b"clean")
    {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{pool} never clean"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `mount -t fuse.amberfs` with fstab's and systemd's options, a plain
/// `umount`, and an fstab line mounted by its directory.
#[test]
fn mount_by_type_and_from_fstab() {
    if !can_mount() || cannot_run(&["mount"], "mount") {
        return;
    }
    let _helper = Helper::install();
    let s = Setup::new();
    let opts = "noatime,nosuid,nodev,policy=amber,nofail,_netdev,x-systemd.device-timeout=5";
    run("mount", &["-t", "fuse.amberfs", s.p(), s.d(), "-o", opts]);
    let guard = Mounted(s.dir.clone());
    assert!(is_mounted(&s.dir));
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let line = info.lines().find(|l| l.contains(s.d())).unwrap();
    assert!(
        line.contains("nosuid") && line.contains("noatime"),
        "{line}"
    );
    fs::write(s.at("f"), b"through mount -t").unwrap();
    run("umount", &[s.d()]);
    assert!(!is_mounted(&s.dir));
    wait_clean(s.p());
    s.fsck_clean();
    let fstab = s.tmp.path().join("fstab");
    fs::write(
        &fstab,
        format!(
            "{} {} fuse.amberfs defaults,noatime,nofail 0 0\n",
            s.p(),
            s.d()
        ),
    )
    .unwrap();
    run("mount", &["-T", fstab.to_str().unwrap(), s.d()]);
    assert_eq!(fs::read(s.at("f")).unwrap(), b"through mount -t");
    guard.umount();
    let out = Command::new("mount")
        .args(["-t", "fuse.amberfs", s.p(), s.d(), "-o", "bogus=1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("bogus"), "{err}");
    assert!(!is_mounted(&s.dir));
}

/// A root mount takes `-o dev,suid` (device nodes and set-user-ID
/// programs on a pool, as on ext4); without them it stays nodev,nosuid.
#[test]
fn dev_and_suid_only_when_asked() {
    if !can_mount() {
        return;
    }
    let flags = |s: &Setup| {
        let info = fs::read_to_string("/proc/self/mountinfo").unwrap();
        let line = info
            .lines()
            .find(|l| l.contains(s.d()))
            .unwrap()
            .to_string();
        (line.contains("nodev"), line.contains("nosuid"))
    };
    let s = Setup::made_with(&[], vec!["-o", "dev,suid"]);
    let (m, _, _) = s.mount();
    assert_eq!(flags(&s), (false, false));
    run("mknod", &[s.at("null").to_str().unwrap(), "c", "1", "3"]);
    fs::write(s.at("null"), b"into /dev/null").unwrap();
    m.umount();
    let plain = Setup {
        options: vec![],
        ..s
    };
    let (m, _, _) = plain.mount();
    assert_eq!(flags(&plain), (true, true));
    let err = fs::write(plain.at("null"), b"x").unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied, "{err}");
    m.umount();
}

/// Through the mount, after writes and a delete: fallocate of all but
/// 512 KiB of what statfs reports available succeeds, as on ext4.
#[test]
fn fallocate_of_nearly_all_the_free_space() {
    if !can_mount() || cannot_run(&["fallocate", "stat"], "util-linux") {
        return;
    }
    let s = Setup::new();
    let (m, _, _) = s.mount();
    fs::write(s.at("w"), vec![1u8; 24 << 20]).unwrap();
    fs::remove_file(s.at("w")).unwrap();
    fs::write(s.at("kept"), vec![2u8; 8 << 20]).unwrap();
    let avail: u64 = run("stat", &["-f", "-c", "%a", s.d()])
        .trim()
        .parse()
        .unwrap();
    let len = (avail * 4096 - (512 << 10)).to_string();
    run("fallocate", &["-l", &len, s.at("big").to_str().unwrap()]);
    assert_eq!(fs::metadata(s.at("big")).unwrap().len().to_string(), len);
    m.umount();
    s.fsck_clean();
}

/// `-o strictatime`: every read through the mount moves the atime, even
/// one newer than every change, which relatime leaves (`-o relatime`
/// checks the test tells them apart).
#[test]
fn strictatime_through_the_mount() {
    if !can_mount() || cannot_run(&["touch"], "coreutils") {
        return;
    }
    for (option, moves) in [("strictatime", true), ("relatime", false)] {
        let s = Setup::made_with(&[], vec!["-o", option]);
        let (m, _, _) = s.mount();
        let f = s.at("f");
        fs::write(&f, b"read me").unwrap();
        // An atime an hour ahead: newer than every change.
        let ahead = (std::time::SystemTime::now() + Duration::from_secs(3_600))
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        run(
            "touch",
            &["-a", "-d", &format!("@{ahead}"), f.to_str().unwrap()],
        );
        fs::read(&f).unwrap();
        // Past the kernel's 1 s attribute cache.
        std::thread::sleep(Duration::from_millis(1_100));
        let atime = fs::metadata(&f).unwrap().atime();
        assert_eq!(
            atime != ahead as i64,
            moves,
            "{option}: atime {atime}, set to {ahead}"
        );
        m.umount();
    }
}

/// A write by root through the mount drops the file's capabilities, as
/// on ext4 (the capability set is cap_net_raw, effective).
#[test]
fn a_root_write_drops_file_capabilities() {
    if !can_mount() || cannot_run(&["python3"], "python3") {
        return;
    }
    let s = Setup::new();
    let (m, _, _) = s.mount();
    let f = s.at("prog");
    fs::write(&f, b"#!/bin/true\n").unwrap();
    let script = "import os, sys\n\
        p = sys.argv[1]\n\
        os.setxattr(p, 'security.capability', bytes([1,0,0,2, 0,0x20,0,0, 0,0,0,0, 0,0,0,0, 0,0,0,0]))\n\
        assert 'security.capability' in os.listxattr(p)\n\
        with open(p, 'a') as f: f.write('# changed\\n')\n\
        print(sorted(os.listxattr(p)))\n";
    let out = run("python3", &["-c", script, f.to_str().unwrap()]);
    assert_eq!(out.trim(), "[]", "capabilities kept after a write: {out}");
    m.umount();
}

/// A write by a user drops set-user-ID and set-group-ID, and `stat`
/// shows it at once, not after the kernel's attribute cache expires.
#[test]
fn dropped_set_id_bits_show_at_once() {
    if !can_mount() || cannot_run(&["setpriv"], "util-linux") {
        return;
    }
    let s = Setup::new();
    let (m, _, _) = s.mount();
    fs::set_permissions(&s.dir, fs::Permissions::from_mode(0o777)).unwrap();
    let f = s.at("setid");
    fs::write(&f, b"x").unwrap();
    fs::set_permissions(&f, fs::Permissions::from_mode(0o6777)).unwrap();
    assert_eq!(
        fs::metadata(&f).unwrap().permissions().mode() & 0o7777,
        0o6777
    );
    let append = format!("echo y >> {}", f.display());
    run(
        "setpriv",
        &[
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "sh",
            "-c",
            &append,
        ],
    );
    assert_eq!(
        fs::metadata(&f).unwrap().permissions().mode() & 0o7777,
        0o777
    );
    m.umount();
}

/// fallocate, hole punching and zeroing by a user outside a file's group
/// drop set-group-ID from it when it has no group-execute, as Linux does;
/// by one in the group (or root) they keep it.
#[test]
fn fallocate_from_outside_the_group_drops_set_group_id() {
    if !can_mount() || cannot_run(&["setpriv", "fallocate"], "util-linux") {
        return;
    }
    let s = Setup::new();
    let (m, _, _) = s.mount();
    fs::set_permissions(&s.dir, fs::Permissions::from_mode(0o777)).unwrap();
    let f = s.at("g");
    let cases = [
        ("65534", &["-l", "64k"][..], 0o666),
        ("65534", &["-p", "-o", "0", "-l", "4k"][..], 0o666),
        ("65534", &["-z", "-o", "0", "-l", "4k"][..], 0o666),
        ("0", &["-l", "128k"][..], 0o2666),
    ];
    for (gid, args, want) in cases {
        fs::write(&f, b"x").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o2666)).unwrap();
        let regid = format!("--regid={gid}");
        let mut argv = vec!["--reuid=65534", &regid, "--clear-groups", "fallocate"];
        argv.extend_from_slice(args);
        argv.push(f.to_str().unwrap());
        run("setpriv", &argv);
        let mode = fs::metadata(&f).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, want, "gid {gid}, fallocate {args:?}: mode {mode:o}");
    }
    m.umount();
}

/// File handles (name_to_handle_at / open_by_handle_at, what NFS export
/// and backup tools use) stay valid across the unlink of another name and
/// across a remount, and go stale once the file is deleted and its inode
/// number reused (generations).
#[test]
fn file_handles_outlive_a_remount() {
    if !can_mount() || cannot_run(&["cc"], "gcc") {
        return;
    }
    let s = Setup::new();
    let exe = s.tmp.path().join("handles");
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/handles.c");
    run(
        "cc",
        &["-Wall", "-Werror", "-o", exe.to_str().unwrap(), src],
    );
    let exe = exe.to_str().unwrap();
    let handle = s.tmp.path().join("h");
    let handle = handle.to_str().unwrap();
    let (m, _, _) = s.mount();
    fs::write(s.at("a"), b"by handle").unwrap();
    fs::hard_link(s.at("a"), s.at("b")).unwrap();
    run(exe, &["save", s.at("a").to_str().unwrap(), handle]);
    fs::remove_file(s.at("b")).unwrap();
    assert_eq!(run(exe, &["read", s.d(), handle]), "by handle");
    m.umount();
    let (m, _, _) = s.mount();
    assert_eq!(run(exe, &["read", s.d(), handle]), "by handle");
    fs::remove_file(s.at("a")).unwrap();
    fs::write(s.at("c"), b"another file").unwrap();
    let stale = Command::new(exe)
        .args(["read", s.d(), handle])
        .output()
        .unwrap();
    assert_eq!(
        stale.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&stale.stderr)
    );
    m.umount();
}
