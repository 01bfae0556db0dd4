//! Pools on read-only media, not writable by the user, or read with
//! `-o ro`: the offline tools that only read work and write nothing (the
//! pool's bytes are compared before and after), the others refuse with
//! what to do, and `amberfs mount -o ro` serves the pool read-only. The
//! tests that need root (a read-only bind mount, another user, FUSE) say
//! "skipped" and pass without it.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use amber_core::{Fs, MountOptions};
use amber_pmem::{MapOptions, MmapDevice};

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

/// Expects `code` and an `amberfs:` message; returns the message.
fn fails_with<S: AsRef<std::ffi::OsStr>>(code: i32, args: &[S]) -> String {
    let out = amberfs(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    assert!(err.contains("amberfs: "), "unprefixed message: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    err
}

fn is_root() -> bool {
    fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// A pool holding `/d/f` (300 KB) and `/small`, in a directory of its
/// own that every user may read.
struct Pool {
    tmp: tempfile::TempDir,
    path: PathBuf,
    big: Vec<u8>,
}

impl Pool {
    fn new() -> Pool {
        let tmp = tempfile::tempdir().unwrap();
        fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let path = tmp.path().join("ro.pool");
        let p = path.to_str().unwrap();
        ok(&["mkfs", p, "--size", "32M"]);
        let big: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 253) as u8).collect();
        let local = tmp.path().join("big");
        fs::write(&local, &big).unwrap();
        fs::write(tmp.path().join("small"), b"hello\n").unwrap();
        ok(&["mkdir", p, "/d"]);
        ok(&["put", p, local.to_str().unwrap(), "/d/f"]);
        ok(&[
            "put",
            p,
            tmp.path().join("small").to_str().unwrap(),
            "/small",
        ]);
        Pool { tmp, path, big }
    }

    fn p(&self) -> &str {
        self.path.to_str().unwrap()
    }

    fn bytes(&self) -> Vec<u8> {
        fs::read(&self.path).unwrap()
    }

    fn local(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }
}

/// Every offline command that only reads, run on `pool` (the pool path
/// as the commands see it), each checked for what it prints or copies.
fn every_reader_works(pool: &str, p: &Pool, extra: &[&str]) {
    let with = |args: &[&str]| -> Vec<String> {
        args.iter().chain(extra).map(|a| a.to_string()).collect()
    };
    assert!(ok(&with(&["ls", pool, "/"])).contains("small"));
    assert_eq!(ok(&with(&["cat", pool, "/small"])), "hello\n");
    let got = p.local(&format!("got{}", extra.len()));
    ok(&with(&["get", pool, "/d/f", got.to_str().unwrap()]));
    assert!(fs::read(&got).unwrap() == p.big);
    let tree = p.local(&format!("tree{}", extra.len()));
    ok(&with(&["get", "-r", pool, "/", tree.to_str().unwrap()]));
    assert!(fs::read(tree.join("d/f")).unwrap() == p.big);
    if extra.is_empty() {
        assert!(ok(&["info", pool]).contains("clean"));
        assert!(ok(&["fsck", pool]).contains("clean"));
        let saved = p.local("salvaged");
        ok(&["salvage", pool, saved.to_str().unwrap()]);
        assert!(fs::read(saved.join("small")).unwrap() == b"hello\n");
    }
}

#[test]
fn dash_o_ro_reads_and_writes_nothing() {
    let p = Pool::new();
    let before = p.bytes();
    every_reader_works(p.p(), &p, &["-o", "ro"]);
    assert!(p.bytes() == before, "a read-only command wrote the pool");
    let small = p.local("small");
    let err = fails_with(
        1,
        &["put", "-o", "ro", p.p(), small.to_str().unwrap(), "/x"],
    );
    assert!(err.contains("read-only file system"), "{err}");
    fails_with(1, &["mkdir", "-o", "ro", p.p(), "/e"]);
    assert!(p.bytes() == before, "a refused change wrote the pool");
}

#[test]
fn a_pool_needing_recovery_is_refused_read_only_with_what_to_do() {
    let p = Pool::new();
    let dev = MmapDevice::open(&p.path, &MapOptions::default()).unwrap();
    let (fs, _) = Fs::mount(dev, MountOptions::default()).unwrap();
    fs.write("/after", b"x").unwrap();
    let dev = fs.core().device().clone();
    drop(fs);
    drop(dev);
    let before = p.bytes();
    let err = fails_with(1, &["ls", "-o", "ro", p.p(), "/"]);
    assert!(
        err.contains("not unmounted cleanly")
            && err.contains("fsck --repair")
            && err.contains(&format!("amberfs salvage {}", p.p())),
        "{err}"
    );
    assert!(p.bytes() == before, "the refusal wrote the pool");
    // Salvage recovers it in memory, and leaves it as it is too.
    let saved = p.local("saved");
    ok(&["salvage", p.p(), saved.to_str().unwrap()]);
    assert!(fs::read(saved.join("d/f")).unwrap() == p.big);
    assert!(p.bytes() == before, "salvage wrote the pool");
}

/// A read-only bind mount of the pool's directory, undone when dropped.
struct RoBind(PathBuf);

impl RoBind {
    fn new(src: &Path, at: &Path) -> Option<RoBind> {
        fs::create_dir(at).unwrap();
        let run = |args: &[&str]| {
            Command::new("mount")
                .args(args)
                .status()
                .is_ok_and(|s| s.success())
        };
        let (s, a) = (src.to_str().unwrap(), at.to_str().unwrap());
        if !run(&["--bind", s, a]) {
            return None;
        }
        let bind = RoBind(at.to_path_buf());
        run(&["-o", "remount,bind,ro", a]).then_some(bind)
    }
}

impl Drop for RoBind {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_pool_on_a_read_only_bind_mount() {
    if !is_root() {
        eprintln!("skipped: a read-only bind mount needs root");
        return;
    }
    let p = Pool::new();
    let before = p.bytes();
    let src = p.local("src");
    fs::create_dir(&src).unwrap();
    fs::copy(&p.path, src.join("ro.pool")).unwrap();
    let Some(_bind) = RoBind::new(&src, &p.local("ro")) else {
        eprintln!("skipped: mount --bind refused here");
        return;
    };
    let ro = p.local("ro/ro.pool");
    let ro = ro.to_str().unwrap();
    every_reader_works(ro, &p, &[]);
    assert!(ok(&["info", ro]).contains("read_only:         yes"));
    let small = p.local("small");
    for args in [
        vec!["put", ro, small.to_str().unwrap(), "/x"],
        vec!["mkdir", ro, "/e"],
        vec!["rm", ro, "/small"],
    ] {
        let err = fails_with(1, &args);
        assert!(
            err.contains("read-only file system") && err.contains("-o ro"),
            "{err}"
        );
    }
    let err = fails_with(8, &["fsck", "--repair", ro]);
    assert!(err.contains("read-only"), "{err}");
    let mnt = p.local("mnt");
    fs::create_dir(&mnt).unwrap();
    let err = fails_with(1, &["mount", ro, mnt.to_str().unwrap()]);
    assert!(err.contains("amberfs mount -o ro"), "{err}");
    assert!(fs::read(ro).unwrap() == before, "the pool changed");
}

#[test]
fn a_pool_another_user_may_only_read() {
    if !is_root() || !Path::new("/usr/bin/setpriv").exists() {
        eprintln!("skipped: needs root and setpriv to run as another user");
        return;
    }
    let p = Pool::new();
    fs::set_permissions(&p.path, fs::Permissions::from_mode(0o444)).unwrap();
    let before = p.bytes();
    let as_nobody = |args: &[&str]| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(env!("CARGO_BIN_EXE_amberfs"))
            .args(args)
            .output()
            .unwrap()
    };
    let ls = as_nobody(&["ls", p.p(), "/"]);
    assert!(
        ls.status.success(),
        "{}",
        String::from_utf8_lossy(&ls.stderr)
    );
    assert!(String::from_utf8_lossy(&ls.stdout).contains("small"));
    let cat = as_nobody(&["cat", p.p(), "/d/f"]);
    assert!(cat.status.success() && cat.stdout == p.big);
    let fsck = as_nobody(&["fsck", p.p()]);
    assert_eq!(fsck.status.code(), Some(0));
    let put = as_nobody(&["mkdir", p.p(), "/e"]);
    let err = String::from_utf8_lossy(&put.stderr);
    assert_eq!(put.status.code(), Some(1));
    assert!(
        err.contains("permission denied") && err.contains("-o ro"),
        "{err}"
    );
    assert!(p.bytes() == before, "the pool changed");
    fs::set_permissions(&p.path, fs::Permissions::from_mode(0o000)).unwrap();
    let ls = as_nobody(&["ls", p.p(), "/"]);
    let err = String::from_utf8_lossy(&ls.stderr);
    assert!(
        err.contains("cannot read pool") && err.contains("permission denied"),
        "{err}"
    );
}

fn can_mount() -> bool {
    if !(is_root() && Path::new("/dev/fuse").exists()) {
        eprintln!("skipped: needs root and /dev/fuse");
        return false;
    }
    true
}

/// Unmounts a FUSE mount left behind by a failed test.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .stderr(Stdio::null())
            .status();
    }
}

#[test]
fn mount_dash_o_ro_serves_the_pool_read_only() {
    if !can_mount() {
        return;
    }
    let p = Pool::new();
    let before = p.bytes();
    let mnt = p.local("mnt");
    fs::create_dir(&mnt).unwrap();
    let log = p.local("daemon.log");
    ok(&[
        "mount",
        "-o",
        "ro",
        p.p(),
        mnt.to_str().unwrap(),
        "--log",
        log.to_str().unwrap(),
    ]);
    let guard = Mounted(mnt.clone());
    assert!(fs::read(mnt.join("d/f")).unwrap() == p.big);
    assert_eq!(fs::read(mnt.join("small")).unwrap(), b"hello\n");
    let erofs = |r: std::io::Result<()>| {
        let e = r.expect_err("a change went through a read-only mount");
        assert_eq!(e.raw_os_error(), Some(libc_erofs()), "{e}");
    };
    erofs(fs::write(mnt.join("new"), b"x"));
    erofs(
        fs::OpenOptions::new()
            .append(true)
            .open(mnt.join("small"))
            .map(|_| ()),
    );
    erofs(fs::create_dir(mnt.join("e")));
    erofs(fs::remove_file(mnt.join("small")));
    erofs(fs::rename(mnt.join("small"), mnt.join("s2")));
    erofs(fs::set_permissions(
        mnt.join("small"),
        fs::Permissions::from_mode(0o600),
    ));
    let out = ok(&["umount", mnt.to_str().unwrap()]);
    assert!(out.contains("unmounted"), "{out}");
    drop(guard);
    assert!(p.bytes() == before, "a read-only mount wrote the pool");
    assert!(fs::read_to_string(&log).unwrap().contains("read-only"));
}

/// EROFS on Linux.
fn libc_erofs() -> i32 {
    30
}
