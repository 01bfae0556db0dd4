//! The interposer in real processes: tests/preload/calls.c call by call,
//! a busy pool failing calls under the mount, kill -9 and recovery, exec.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use amber_core::{Fs, MountOptions};
use amber_format::inode::flags::APPEND;
use amber_format::FormatParams;
use amber_pmem::{MapOptions, MmapDevice};

/// The interposer, built beside this test's profile directory
/// (target/<profile>). `cargo test` builds no cdylib for a package's own
/// integration tests, so this builds it once with the workspace's test
/// build command (`--workspace --lib --bins --tests`): the same features
/// as `cargo test --workspace`, so every crate that build compiled is
/// reused (`-p amber-ffi-preload` alone resolves other features and
/// recompiled the tree, a minute of CI).
fn lib() -> PathBuf {
    const TEST_BUILD: [&str; 7] = [
        "build",
        "--profile",
        "test",
        "--workspace",
        "--lib",
        "--bins",
        "--tests",
    ];
    static BUILT: std::sync::Once = std::sync::Once::new();
    let exe = std::env::current_exe().expect("test executable");
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target/<profile>");
    let so = dir.join("libamberfs_preload.so");
    BUILT.call_once(|| {
        let status = Command::new(env!("CARGO"))
            .args(TEST_BUILD)
            .status()
            .expect("run cargo build --workspace");
        assert!(status.success(), "cargo build --workspace failed");
    });
    assert!(so.exists(), "{} was not built", so.display());
    so
}

/// A pool file in /dev/shm, removed when dropped: also when its test
/// fails, so a failing run leaves no 64 MiB file behind in RAM.
struct Pool(PathBuf);

impl Drop for Pool {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl std::ops::Deref for Pool {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

/// A fresh formatted pool in /dev/shm.
fn pool(name: &str) -> Pool {
    pool_for(name, &MountOptions::default())
}

/// A fresh pool in /dev/shm in the layout the policy `opts` names needs.
fn pool_for(name: &str, opts: &MountOptions) -> Pool {
    let p = PathBuf::from(format!(
        "/dev/shm/ffi-preload-{name}-{}.pool",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&p);
    let dev = MmapDevice::create(&p, 64 << 20, &MapOptions::default()).expect("create pool");
    let params = FormatParams {
        layout: amber_core::data::layout_for(opts),
        ..FormatParams::for_size(64 << 20)
    };
    Fs::format(&dev, &params).expect("format");
    Pool(p)
}

/// `cmd` with the interposer serving `mount` from `pool`.
fn preloaded(cmd: &str, pool: &Path, mount: &Path) -> Command {
    let mut c = Command::new(cmd);
    c.env("LD_PRELOAD", lib())
        .env("AMBERFS_POOL", pool)
        .env("AMBERFS_MOUNT", mount);
    c
}

/// Runs `c`, which must fail with each of `said` on its stderr.
fn fails_saying(mut c: Command, said: &[&str]) {
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("cannot run {c:?}: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{c:?} succeeded");
    assert!(said.iter().all(|s| stderr.contains(s)), "{c:?}: {stderr}");
}

fn ok(mut c: Command) -> Output {
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("cannot run {c:?}: {e}"));
    assert!(
        out.status.success(),
        "{c:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Mounts `pool` in this process (recovering it), runs `f`, unmounts.
fn with_pool<T>(pool: &Path, f: impl FnOnce(&Fs<MmapDevice>) -> T) -> T {
    let dev = MmapDevice::open(pool, &MapOptions::default()).expect("open pool");
    let (fs, _) = Fs::mount(dev, MountOptions::default()).expect("mount");
    let r = f(&fs);
    fs.unmount().expect("unmount");
    r
}

#[test]
fn every_covered_call_under_the_interposer() {
    let work = tempfile::tempdir().unwrap();
    let exe = work.path().join("calls");
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/preload/calls.c");
    let mut cc = Command::new("cc");
    cc.args(["-Wall", "-Werror", "-o"]).arg(&exe).arg(src);
    ok(cc);
    let p = pool("calls");
    with_pool(&p, |fs| {
        fs.write("/flagged", b"log").unwrap();
        let ino = fs.metadata("/flagged").unwrap().attr().ino;
        fs.core().set_flags(ino, APPEND).unwrap();
    });
    // The mount directory need not exist in the kernel at all.
    let mount = work.path().join("not-in-the-kernel");
    let mut c = preloaded(exe.to_str().unwrap(), &p, &mount);
    c.arg(&mount);
    let out = ok(c);
    assert!(String::from_utf8_lossy(&out.stdout).contains("calls.c: ok"));
    let (text, at_exit) = with_pool(&p, |fs| {
        (fs.read("/s.txt").unwrap(), fs.read("/exit.txt").unwrap())
    });
    assert_eq!(text, b"line 1\nline 2\nx");
    assert_eq!(
        at_exit, b"written at exit\n",
        "stdout flushed before the unmount"
    );
}

/// tests/preload/mapped.c under policies that write every way there is
/// (amber's zone, own commits and buffer; hunter's logs; nova's logs;
/// direct in place): shared mappings show the file's own pages both
/// ways, follow its size, and every call of the mmap family works on
/// them. The pool checks clean afterwards.
#[test]
fn mapped_files_under_the_interposer() {
    let work = tempfile::tempdir().unwrap();
    let exe = work.path().join("mapped");
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/preload/mapped.c");
    let mut cc = Command::new("cc");
    cc.args(["-Wall", "-Werror", "-o"]).arg(&exe).arg(src);
    ok(cc);
    for opts in [
        "amber_buffer=always",
        "policy=hunter",
        "policy=nova",
        "policy=direct",
    ] {
        let mount_opts = MountOptions::parse(opts).unwrap();
        let p = pool_for("mapped", &mount_opts);
        let mount = work.path().join("m");
        let mut c = preloaded(exe.to_str().unwrap(), &p, &mount);
        c.env("AMBERFS_OPTIONS", opts).arg(&mount);
        let out = ok(c);
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("mapped.c: ok"),
            "{opts}"
        );
        let dev = MmapDevice::open(&p, &MapOptions::default()).expect("open pool");
        let sb = amber_core::fs::read_superblock(&dev).unwrap();
        assert_eq!(
            sb.state,
            amber_format::PoolState::Clean,
            "{opts}: unmounted at exit"
        );
        let rep =
            amber_core::check::check(&dev, &amber_core::check::CheckOptions::default()).unwrap();
        assert!(rep.is_clean(), "{opts}: fsck: {rep}");
    }
}

/// Where another process holds the pool (or it does not open, or none is
/// named) and no FUSE mount of it is up, a call under the mount directory
/// fails saying why, instead of reaching the kernel's directory there;
/// calls elsewhere are the kernel's.
#[test]
fn a_busy_pool_fails_calls_under_the_mount_saying_why() {
    let work = tempfile::tempdir().unwrap();
    let p = pool("busy");
    let held = MmapDevice::open(&p, &MapOptions::default()).expect("hold the pool");
    let target = work.path().join("f");
    let mut c = preloaded("cp", &p, work.path());
    c.arg("/etc/hostname").arg(&target);
    fails_saying(
        c,
        &["another process holds the pool", "Device or resource busy"],
    );
    assert!(!target.exists(), "the copy reached the kernel's directory");
    let outside = work.path().with_extension("outside");
    let mut c = preloaded("cp", &p, work.path());
    c.arg("/etc/hostname").arg(&outside);
    ok(c);
    let _ = std::fs::remove_file(&outside);
    // A pool that does not open: its error, not a kernel file.
    let mut c = preloaded("touch", &work.path().join("no.pool"), work.path());
    c.arg(&target);
    fails_saying(c, &["No such file or directory"]);
    assert!(!target.exists(), "the touch reached the kernel's directory");
    // No pool named and no mount up: the same, saying so.
    let mut c = Command::new("touch");
    c.env("LD_PRELOAD", lib())
        .env("AMBERFS_MOUNT", work.path())
        .arg(&target);
    fails_saying(
        c,
        &["AMBERFS_POOL names no pool", "No such file or directory"],
    );
    assert!(!target.exists(), "the touch reached the kernel's directory");
    drop(held);
    assert!(
        with_pool(&p, |fs| !fs.exists("/f")),
        "the held pool was not touched"
    );
}

/// The shim without the served library beside it, where this process
/// would serve the pool (no FUSE mount up): the first call ends the
/// process saying why, and nothing reaches the kernel's directory.
#[test]
fn a_shim_without_its_interposer_ends_the_process_saying_why() {
    let work = tempfile::tempdir().unwrap();
    let p = pool("alone");
    let alone = work.path().join("libamberfs_preload.so");
    std::fs::copy(lib(), &alone).expect("copy the shim");
    let target = work.path().join("f");
    let mut c = Command::new("cp");
    c.env("LD_PRELOAD", &alone)
        .env("AMBERFS_POOL", &*p)
        .env("AMBERFS_MOUNT", work.path())
        .arg("/etc/hostname")
        .arg(&target);
    let out = c.output().expect("run cp");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "cp without the interposer succeeded");
    assert!(
        stderr.contains("cannot load libamberfs_served.so"),
        "stderr: {stderr}"
    );
    assert!(!target.exists(), "the copy reached the kernel's directory");
    // With no pool named the shim never needs it.
    let mut c = Command::new("cp");
    c.env("LD_PRELOAD", &alone)
        .arg("/etc/hostname")
        .arg(&target);
    ok(c);
}

#[test]
fn kill_9_loses_nothing_fsynced() {
    let work = tempfile::tempdir().unwrap();
    let p = pool("kill");
    let m = work.path().join("m");
    let script = format!(
        "import os, sys, time\n\
         fd = os.open('{m}/data', os.O_CREAT | os.O_WRONLY, 0o644)\n\
         for i in range(200):\n\
         \x20   os.write(fd, b'%06d\\n' % i)\n\
         os.fsync(fd)\n\
         os.write(fd, b'not synced\\n')\n\
         print('ready', flush=True)\n\
         time.sleep(60)\n",
        m = m.display()
    );
    let mut c = preloaded("python3", &p, &m);
    c.arg("-c").arg(script).stdout(Stdio::piped());
    let mut child = c.spawn().expect("python3");
    let mut ready = [0u8; 6];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut ready).unwrap();
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let data = with_pool(&p, |fs| fs.read("/data").unwrap());
    let want: Vec<u8> = (0..200)
        .flat_map(|i| format!("{i:06}\n").into_bytes())
        .collect();
    assert!(data.starts_with(&want), "fsync'd data intact after kill -9");
}

#[test]
fn exec_hands_the_pool_to_the_new_program() {
    let work = tempfile::tempdir().unwrap();
    let p = pool("exec");
    let m = work.path().join("m");
    let script = format!(
        "import os\n\
         with open('{m}/note', 'w') as f: f.write('written before exec')\n\
         os.execv('/bin/cat', ['cat', '{m}/note'])\n",
        m = m.display()
    );
    let mut c = preloaded("python3", &p, &m);
    c.arg("-c").arg(script);
    let out = ok(c);
    assert_eq!(out.stdout, b"written before exec");
}

/// Under `pcm` amber buffers unsynced writes in DRAM (HiNFS's model
/// deciding, as on slow PM); the unmount at exit writes them back from an
/// atexit handler, after the main thread's locals are gone. That must
/// neither panic nor lose the data; and an fsync'd directory (as sqlite3
/// does around its journal) keeps its entries.
#[test]
fn exit_writes_back_what_the_buffer_held() {
    let work = tempfile::tempdir().unwrap();
    let p = pool("exit");
    let m = work.path().join("m");
    let script = format!(
        "import os\n\
         fd = os.open('{m}/lazy', os.O_CREAT | os.O_WRONLY, 0o644)\n\
         for i in range(256):\n\
         \x20   os.write(fd, bytes([i]) * 4096)\n\
         j = os.open('{m}/journal', os.O_CREAT | os.O_WRONLY, 0o644)\n\
         d = os.open('{m}', os.O_RDONLY)\n\
         os.fsync(d)\n\
         os.unlink('{m}/journal')\n\
         os.close(fd)\n",
        m = m.display()
    );
    let mut c = preloaded("python3", &p, &m);
    c.env("AMBERFS_EMULATE", "pcm")
        .env("AMBERFS_OPTIONS", "amber_buffer=model")
        .arg("-c")
        .arg(script);
    let out = ok(c);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dev = MmapDevice::open(&p, &MapOptions::default()).expect("open pool");
    let rep = amber_core::check::check(&dev, &amber_core::check::CheckOptions::default()).unwrap();
    assert!(rep.is_clean(), "fsck after the exit: {rep}");
    drop(dev);
    let data = with_pool(&p, |fs| fs.read("/lazy").unwrap());
    let want: Vec<u8> = (0..=255u8).flat_map(|i| [i; 4096]).collect();
    assert!(
        data == want,
        "every unsynced write reached the pool at exit"
    );
}

/// The pool's background threads hold no descriptor of the program: they
/// run on a private, emptied copy of the descriptor table (so Linux keeps
/// the program's descriptor calls on its single-user fast path), and a
/// pipe whose write end the program closes after the pool opened reads
/// as ended at once instead of being held open by a thread's copy.
#[test]
fn background_threads_hold_no_descriptor() {
    let work = tempfile::tempdir().unwrap();
    let p = pool("threads");
    let m = work.path().join("m");
    let script = format!(
        "import os, select\n\
         r, w = os.pipe()\n\
         with open('{m}/f', 'w') as f: f.write('opens the pool')\n\
         import time\n\
         me = os.getpid()\n\
         def holding():\n\
         \x20   out = {{}}\n\
         \x20   for t in os.listdir(f'/proc/{{me}}/task'):\n\
         \x20       name = open(f'/proc/{{me}}/task/{{t}}/comm').read().strip()\n\
         \x20       if name.startswith('amber-'):\n\
         \x20           out[name] = os.listdir(f'/proc/{{me}}/task/{{t}}/fd')\n\
         \x20   return out\n\
         # The threads name themselves, then empty their table: wait for both.\n\
         for _ in range(500):\n\
         \x20   held = holding()\n\
         \x20   if held and not any(held.values()):\n\
         \x20       break\n\
         \x20   time.sleep(0.01)\n\
         assert held, 'the pool runs background threads'\n\
         assert not any(held.values()), held\n\
         os.close(w)\n\
         ready, _, _ = select.select([r], [], [], 5)\n\
         assert ready and os.read(r, 1) == b'', 'the pipe ends when the program closes it'\n\
         print('ok')\n",
        m = m.display()
    );
    let mut c = preloaded("python3", &p, &m);
    c.arg("-c").arg(script);
    let out = ok(c);
    assert_eq!(out.stdout, b"ok\n");
}
