//! Inode flags (chattr +i, +a): what each forbids, enforced by the core
//! for every front end, and kept in the inode across a crash.

use amber_core::data::FallocMode;
use amber_core::fs::{format, mount, XattrSet};
use amber_core::{Core, FsError, MountOptions, OpenOptions, Owner, RenameMode, SetAttr, TimeSet};
use amber_format::inode::flags::{APPEND, IMMUTABLE};
use amber_format::{FileKind, FormatParams, Timespec, ROOT_INO};
use amber_pmem::{MapOptions, MmapDevice};
use std::sync::Arc;

const ME: Owner = Owner::new(0, 0);

/// A fresh default pool (split layout) mounted with the default policy
/// (amber), holding directory `d` with file `d/e`, and file `f` with data.
fn fresh() -> (Arc<MmapDevice>, Core<MmapDevice>, u64, u64) {
    let size = 16 << 20;
    let dev = Arc::new(MmapDevice::anonymous(size, &MapOptions::default()).unwrap());
    format(&*dev, &FormatParams::for_size(size)).unwrap();
    let (fs, _) = mount(dev.clone(), MountOptions::default()).unwrap();
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, ME).unwrap().ino;
    fs.mknod(d, b"e", FileKind::Regular, 0o644, 0, ME).unwrap();
    let f = fs
        .mknod(ROOT_INO, b"f", FileKind::Regular, 0o644, 0, ME)
        .unwrap()
        .ino;
    fs.write(f, Some(0), b"0123456789", false).unwrap();
    // amber queues a write's size until fsync: make it survive a crash.
    fs.fsync(f).unwrap();
    (dev, fs, d, f)
}

fn protected<T: std::fmt::Debug>(r: Result<T, FsError>, what: &str) {
    assert!(
        matches!(r, Err(FsError::Protected(_))),
        "{what}: {r:?}, want Protected"
    );
}

fn set(f: impl FnOnce(&mut SetAttr)) -> SetAttr {
    let mut s = SetAttr::default();
    f(&mut s);
    s
}

const AT: TimeSet = TimeSet::At(Timespec {
    secs: 1_000,
    nsecs: 0,
});

/// What neither flag allows of file `f` (in the root, beside `d`).
fn changes_refused(fs: &Core<MmapDevice>, d: u64, f: u64) {
    protected(fs.write(f, Some(0), b"x", false), "overwrite");
    protected(fs.setattr(f, &set(|s| s.size = Some(0))), "truncate");
    protected(fs.setattr(f, &set(|s| s.perm = Some(0o600))), "chmod");
    protected(fs.setattr(f, &set(|s| s.uid = Some(5))), "chown");
    protected(fs.setattr(f, &set(|s| s.mtime = Some(AT))), "utimens");
    let punch = FallocMode::PunchHole;
    protected(fs.fallocate(f, 0, 4, punch), "punch");
    let zero = FallocMode::ZeroRange { keep_size: true };
    protected(fs.fallocate(f, 0, 4, zero), "zero range");
    let either = XattrSet::Either;
    protected(fs.setxattr(f, b"user.a", b"1", either), "setxattr");
    protected(fs.removexattr(f, b"user.a"), "removexattr");
    protected(fs.link(f, d, b"l"), "link");
    protected(fs.unlink(ROOT_INO, b"f"), "unlink");
    let replace = RenameMode::Replace;
    protected(fs.rename(ROOT_INO, b"f", d, b"f", replace), "rename");
    protected(fs.rename(d, b"e", ROOT_INO, b"f", replace), "rename over");
    protected(fs.may_open(f, true, false), "open for writing");
}

#[test]
fn immutable_forbids_every_change_but_clearing_it() {
    let (dev, fs, d, f) = fresh();
    fs.setxattr(f, b"user.a", b"1", XattrSet::Either).unwrap();
    assert_eq!(fs.set_flags(f, IMMUTABLE).unwrap().flags, IMMUTABLE);
    changes_refused(&fs, d, f);
    protected(fs.write(f, None, b"x", false), "append");
    let now = set(|s| s.mtime = Some(TimeSet::Now));
    protected(fs.setattr(f, &now), "touch");
    let grow = FallocMode::Allocate { keep_size: false };
    protected(fs.fallocate(f, 0, 8192, grow), "allocate");
    protected(fs.may_open(f, true, true), "open for appending");
    fs.may_open(f, false, false).unwrap();
    let mut buf = [0u8; 10];
    assert_eq!(fs.read(f, 0, &mut buf).unwrap(), 10);
    // An immutable directory takes no entry and loses none.
    fs.set_flags(d, IMMUTABLE).unwrap();
    protected(fs.mknod(d, b"n", FileKind::Regular, 0o644, 0, ME), "create");
    protected(fs.unlink(d, b"e"), "unlink in it");
    let sub = fs.mkdir(ROOT_INO, b"sub", 0o755, ME).unwrap().ino;
    fs.set_flags(sub, IMMUTABLE).unwrap();
    protected(fs.rmdir(ROOT_INO, b"sub"), "rmdir");
    // Every refusal changed nothing, and the flags persist.
    drop(fs); // a crash
    let (fs, _) = mount(dev, MountOptions::default()).unwrap();
    assert_eq!(fs.flags(f).unwrap(), IMMUTABLE);
    assert_eq!(fs.getattr(f).unwrap().size, 10);
    assert_eq!(fs.getxattr(f, b"user.a").unwrap(), b"1");
    protected(fs.write(f, Some(0), b"x", false), "after the crash");
    fs.set_flags(f, 0).unwrap();
    fs.write(f, Some(0), b"x", false).unwrap();
    fs.set_flags(d, 0).unwrap();
    fs.unlink(d, b"e").unwrap();
}

#[test]
fn append_only_allows_appending_only() {
    let (dev, fs, d, f) = fresh();
    fs.set_flags(f, APPEND).unwrap();
    changes_refused(&fs, d, f);
    fs.write(f, None, b"ab", false).unwrap();
    fs.write(f, Some(12), b"cd", false).unwrap();
    protected(fs.write(f, Some(20), b"x", false), "write past the end");
    fs.setattr(f, &set(|s| s.atime = Some(TimeSet::Now)))
        .unwrap();
    let keep = FallocMode::Allocate { keep_size: true };
    fs.fallocate(f, 0, 8192, keep).unwrap();
    fs.may_open(f, true, true).unwrap();
    // An append-only directory takes entries but loses none.
    fs.set_flags(d, APPEND).unwrap();
    fs.mknod(d, b"n", FileKind::Regular, 0o644, 0, ME).unwrap();
    protected(fs.unlink(d, b"e"), "unlink in it");
    let replace = RenameMode::Replace;
    protected(fs.rename(d, b"e", ROOT_INO, b"e2", replace), "rename out");
    fs.fsync(f).unwrap();
    drop(fs); // a crash
    let (fs, _) = mount(dev, MountOptions::default()).unwrap();
    assert_eq!(fs.flags(f).unwrap(), APPEND);
    let mut buf = [0u8; 14];
    assert_eq!(fs.read(f, 0, &mut buf).unwrap(), 14);
    assert_eq!(&buf, b"0123456789abcd");
}

/// Bits other than immutable and append-only are refused; the library's
/// open obeys the flags as the mount's does.
#[test]
fn unknown_flags_and_the_library() {
    let size = 16 << 20;
    let dev = MmapDevice::anonymous(size, &MapOptions::default()).unwrap();
    format(&dev, &FormatParams::for_size(size)).unwrap();
    let (lib, _) = amber_core::Fs::mount(dev, MountOptions::default()).unwrap();
    lib.write("/f", b"0123456789").unwrap();
    let core = lib.core();
    let f = core.lookup(ROOT_INO, b"f").unwrap().ino;
    assert!(matches!(
        core.set_flags(f, 0x80),
        Err(FsError::Unsupported(_))
    ));
    core.set_flags(f, IMMUTABLE).unwrap();
    let open = OpenOptions::new().write(true).open(&lib, "/f");
    assert!(
        matches!(open, Err(FsError::Protected(_))),
        "{:?}",
        open.err()
    );
    let open = OpenOptions::new().append(true).open(&lib, "/f");
    assert!(matches!(open, Err(FsError::Protected(_))));
    assert_eq!(lib.read("/f").unwrap(), b"0123456789");
    lib.unmount().unwrap();
}

/// rmdir of a directory that is not empty, in a protected directory or
/// protected itself, fails with EPERM (Protected) as on Linux, whose
/// may_delete checks the flags before the file system sees the entries.
#[test]
fn the_flags_come_before_a_directory_not_empty() {
    for flag in [IMMUTABLE, APPEND] {
        let (_dev, fs, d, _f) = fresh();
        let p = fs.mkdir(ROOT_INO, b"p", 0o755, ME).unwrap().ino;
        fs.rename(ROOT_INO, b"d", p, b"d", RenameMode::Replace)
            .unwrap();
        assert!(matches!(fs.rmdir(p, b"d"), Err(FsError::DirectoryNotEmpty)));
        fs.set_flags(p, flag).unwrap();
        protected(
            fs.rmdir(p, b"d"),
            "rmdir of a full directory in a protected one",
        );
        fs.set_flags(p, 0).unwrap();
        fs.set_flags(d, flag).unwrap();
        protected(fs.rmdir(p, b"d"), "rmdir of a full protected directory");
    }
}
