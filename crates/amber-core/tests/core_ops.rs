//! Inode-level operations on a DRAM device, across remounts.

use amber_core::fs::{format, mount};
use amber_core::{MountOptions, Owner, RenameMode, SetAttr};
use amber_format::{FileKind, FormatParams, ROOT_INO};
use amber_pmem::{MapOptions, MmapDevice};
use std::sync::Arc;

fn fresh(size: u64) -> Arc<MmapDevice> {
    let dev = MmapDevice::anonymous(size, &MapOptions::default()).unwrap();
    format(&dev, &FormatParams::for_size(size)).unwrap();
    Arc::new(dev)
}

const ME: Owner = Owner::new(1000, 1000);

fn names(fs: &amber_core::Core<MmapDevice>, dir: u64) -> Vec<String> {
    let mut v = Vec::new();
    fs.readdir(dir, 0, |e| {
        v.push(String::from_utf8(e.name).unwrap());
        true
    })
    .unwrap();
    v.sort();
    v
}

#[test]
fn create_write_read_rename_unlink_remount() {
    let dev = fresh(16 << 20);
    let (fs, rep) = mount(dev.clone(), MountOptions::default()).unwrap();
    assert!(rep.was_clean);
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, ME).unwrap();
    let f = fs
        .mknod(d.ino, b"f", FileKind::Regular, 0o644, 0, ME)
        .unwrap();
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(
        fs.write(f.ino, Some(10), &data, false).unwrap().0,
        data.len()
    );
    let mut back = vec![0u8; data.len() + 10];
    assert_eq!(fs.read(f.ino, 0, &mut back).unwrap(), data.len() + 10);
    assert_eq!(&back[..10], &[0u8; 10]);
    assert_eq!(&back[10..], &data[..]);
    fs.symlink(ROOT_INO, b"short", b"d/f", ME).unwrap();
    let long = vec![b'x'; 300];
    let l = fs.symlink(ROOT_INO, b"long", &long, ME).unwrap();
    assert_eq!(fs.readlink(l.ino).unwrap(), long);
    fs.link(f.ino, ROOT_INO, b"hard").unwrap();
    assert_eq!(fs.getattr(f.ino).unwrap().nlink, 2);
    fs.rename(d.ino, b"f", ROOT_INO, b"moved", RenameMode::Replace)
        .unwrap();
    assert_eq!(
        names(&fs, ROOT_INO),
        ["d", "hard", "long", "moved", "short"]
    );
    fs.setattr(
        f.ino,
        &SetAttr {
            size: Some(5000),
            ..Default::default()
        },
    )
    .unwrap();
    fs.unmount().unwrap();
    drop(fs);

    let (fs, rep) = mount(dev.clone(), MountOptions::default()).unwrap();
    assert!(rep.was_clean, "{rep}");
    assert_eq!(
        names(&fs, ROOT_INO),
        ["d", "hard", "long", "moved", "short"]
    );
    let a = fs.lookup(ROOT_INO, b"moved").unwrap();
    assert_eq!(a.size, 5000);
    let mut back = vec![0u8; 5000];
    fs.read(a.ino, 0, &mut back).unwrap();
    assert_eq!(&back[10..], &data[..4990]);
    fs.unlink(ROOT_INO, b"moved").unwrap();
    fs.unlink(ROOT_INO, b"hard").unwrap();
    fs.rmdir(ROOT_INO, b"d").unwrap();
    assert_eq!(names(&fs, ROOT_INO), ["long", "short"]);
    // Not unmounted: the next mount recovers.
    drop(fs);
    let (fs, rep) = mount(dev, MountOptions::default()).unwrap();
    assert!(!rep.was_clean);
    assert_eq!(names(&fs, ROOT_INO), ["long", "short"]);
    assert_eq!(rep.inodes_in_use, 3);
}

#[test]
fn rename_modes_and_directory_rules() {
    let dev = fresh(8 << 20);
    let (fs, _) = mount(dev, MountOptions::default()).unwrap();
    let a = fs.mkdir(ROOT_INO, b"a", 0o755, ME).unwrap();
    let b = fs.mkdir(a.ino, b"b", 0o755, ME).unwrap();
    fs.mknod(ROOT_INO, b"x", FileKind::Regular, 0o644, 0, ME)
        .unwrap();
    assert_eq!(
        fs.rename(ROOT_INO, b"a", b.ino, b"a2", RenameMode::Replace),
        Err(amber_core::FsError::WouldCreateCycle)
    );
    assert_eq!(
        fs.rename(ROOT_INO, b"x", ROOT_INO, b"a", RenameMode::Replace),
        Err(amber_core::FsError::IsADirectory)
    );
    assert_eq!(
        fs.rename(ROOT_INO, b"x", ROOT_INO, b"a", RenameMode::NoReplace),
        Err(amber_core::FsError::AlreadyExists)
    );
    fs.rename(ROOT_INO, b"x", a.ino, b"b", RenameMode::Exchange)
        .unwrap();
    assert_eq!(fs.lookup(ROOT_INO, b"x").unwrap().ino, b.ino);
    assert_eq!(fs.getattr(b.ino).unwrap().nlink, 2);
    assert_eq!(fs.getattr(ROOT_INO).unwrap().nlink, 4);
    assert_eq!(fs.getattr(a.ino).unwrap().nlink, 2);
    assert_eq!(fs.lookup(b.ino, b"..").unwrap().ino, ROOT_INO);
    assert_eq!(
        fs.rmdir(ROOT_INO, b"a"),
        Err(amber_core::FsError::DirectoryNotEmpty)
    );
}

/// RENAME_WHITEOUT: the source name becomes a character device 0/0 with
/// no permission bits, owned by the caller, in the rename's transaction;
/// to a new name, over an existing file (freed), of a directory (link
/// counts move as for a plain rename); refused with NoReplace over an
/// existing name, changing nothing; all kept across a remount, fsck clean.
#[test]
fn rename_whiteout_leaves_a_device_at_the_source() {
    let dev = fresh(8 << 20);
    let (fs, _) = mount(dev.clone(), MountOptions::default()).unwrap();
    let is_whiteout = |fs: &amber_core::Core<MmapDevice>, dir: u64, name: &[u8]| {
        let a = fs.lookup(dir, name).unwrap();
        (a.kind, a.rdev, a.perm, a.uid, a.nlink) == (FileKind::CharDevice, 0, 0, 7, 1)
    };
    let who = Owner::new(7, 8);
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, ME).unwrap();
    let f = fs
        .mknod(ROOT_INO, b"f", FileKind::Regular, 0o644, 0, ME)
        .unwrap();
    fs.write(f.ino, Some(0), b"data", false).unwrap();
    let free = fs.statfs().inodes_free;
    fs.rename_whiteout(ROOT_INO, b"f", d.ino, b"g", false, who)
        .unwrap();
    assert_eq!(fs.lookup(d.ino, b"g").unwrap().ino, f.ino);
    assert!(is_whiteout(&fs, ROOT_INO, b"f"));
    assert_eq!(fs.statfs().inodes_free, free - 1);
    // Over an existing file, which is freed.
    let t = fs
        .mknod(d.ino, b"t", FileKind::Regular, 0o644, 0, ME)
        .unwrap();
    fs.rename_whiteout(d.ino, b"g", d.ino, b"t", false, who)
        .unwrap();
    assert_eq!(fs.lookup(d.ino, b"t").unwrap().ino, f.ino);
    assert!(is_whiteout(&fs, d.ino, b"g"));
    assert!(fs.getattr(t.ino).is_err());
    // NoReplace over an existing name: refused, no whiteout made.
    let free = fs.statfs().inodes_free;
    assert_eq!(
        fs.rename_whiteout(d.ino, b"t", d.ino, b"g", true, who),
        Err(amber_core::FsError::AlreadyExists)
    );
    assert_eq!(fs.statfs().inodes_free, free);
    // A directory: the root loses the subdirectory link, d gains it.
    let sub = fs.mkdir(ROOT_INO, b"sub", 0o755, ME).unwrap();
    let (root_links, d_links) = (
        fs.getattr(ROOT_INO).unwrap().nlink,
        fs.getattr(d.ino).unwrap().nlink,
    );
    fs.rename_whiteout(ROOT_INO, b"sub", d.ino, b"sub", false, who)
        .unwrap();
    assert!(is_whiteout(&fs, ROOT_INO, b"sub"));
    assert_eq!(fs.getattr(ROOT_INO).unwrap().nlink, root_links - 1);
    assert_eq!(fs.getattr(d.ino).unwrap().nlink, d_links + 1);
    assert_eq!(fs.lookup(sub.ino, b"..").unwrap().ino, d.ino);
    fs.unmount().unwrap();
    drop(fs);
    let rep = amber_core::check::check(&*dev, &Default::default()).unwrap();
    assert!(rep.is_clean(), "fsck: {rep}");
    let (fs, _) = mount(dev, MountOptions::default()).unwrap();
    assert!(is_whiteout(&fs, ROOT_INO, b"f"));
    assert!(is_whiteout(&fs, ROOT_INO, b"sub"));
    assert!(is_whiteout(&fs, d.ino, b"g"));
    assert_eq!(names(&fs, d.ino), ["g", "sub", "t"]);
    let mut back = [0u8; 4];
    fs.read(f.ino, 0, &mut back).unwrap();
    assert_eq!(&back, b"data");
}

#[test]
fn many_entries_and_enospc() {
    let dev = fresh(2 << 20);
    let (fs, _) = mount(dev.clone(), MountOptions::default()).unwrap();
    let mut n = 0;
    loop {
        let name = format!("file-with-a-longish-name-{n:06}");
        match fs.mknod(ROOT_INO, name.as_bytes(), FileKind::Regular, 0o644, 0, ME) {
            Ok(_) => n += 1,
            Err(amber_core::FsError::NoSpace) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(n > 50);
    let f = fs
        .lookup(ROOT_INO, b"file-with-a-longish-name-000000")
        .unwrap();
    let big = vec![7u8; 8 << 20];
    assert_eq!(
        fs.write(f.ino, Some(0), &big, false),
        Err(amber_core::FsError::NoSpace)
    );
    assert_eq!(fs.getattr(f.ino).unwrap().size, 0);
    fs.unmount().unwrap();
    let (fs, _) = mount(dev, MountOptions::default()).unwrap();
    assert_eq!(fs.getattr(f.ino).unwrap().size, 0);
    let mut count = 0;
    fs.readdir(ROOT_INO, 0, |_| {
        count += 1;
        true
    })
    .unwrap();
    assert_eq!(count, n);
}

/// A file "f" holding "data" whose atime (1,000 s after the epoch) is
/// older than its last change: relatime moves it at the next read.
fn stale_atime_file<D: amber_pmem::PmDevice>(
    fs: &amber_core::Core<D>,
) -> (u64, amber_format::Timespec) {
    let f = fs
        .mknod(ROOT_INO, b"f", FileKind::Regular, 0o644, 0, ME)
        .unwrap();
    fs.write(f.ino, Some(0), b"data", false).unwrap();
    let old = amber_format::Timespec {
        secs: 1_000,
        nsecs: 0,
    };
    let set = SetAttr {
        atime: Some(amber_core::TimeSet::At(old)),
        ..Default::default()
    };
    fs.setattr(f.ino, &set).unwrap();
    assert_eq!(fs.getattr(f.ino).unwrap().atime, old);
    (f.ino, old)
}

#[test]
fn reads_move_atime_by_relatime_rules_and_unmount_persists_it() {
    let dev = fresh(8 << 20);
    let (fs, _) = mount(dev.clone(), MountOptions::default()).unwrap();
    let (ino, old) = stale_atime_file(&fs);
    let mut buf = [0u8; 4];
    fs.read(ino, 0, &mut buf).unwrap();
    let moved = fs.getattr(ino).unwrap().atime;
    assert!(moved > old, "a read after a change moves atime");
    fs.unmount().unwrap();
    drop(fs);
    let (fs, _) = mount(dev, MountOptions::default()).unwrap();
    assert_eq!(fs.getattr(ino).unwrap().atime, moved);
}

/// `noatime`: a read that relatime would let move atime leaves it.
#[test]
fn noatime_reads_leave_atime() {
    let opts = MountOptions::parse("noatime").unwrap();
    let (fs, _) = mount(fresh(8 << 20), opts).unwrap();
    let (ino, old) = stale_atime_file(&fs);
    let mut buf = [0u8; 4];
    fs.read(ino, 0, &mut buf).unwrap();
    assert_eq!(&buf, b"data");
    assert_eq!(fs.getattr(ino).unwrap().atime, old);
}

/// `strictatime`: every read moves atime, even one relatime would leave
/// (the atime already newer than every change); and a directory's
/// listing moves its atime by the same rules, unless `nodiratime`.
#[test]
fn strictatime_and_directory_listings() {
    let opts = MountOptions::parse("strictatime,clock=simulated").unwrap();
    let (fs, _) = mount(fresh(8 << 20), opts).unwrap();
    let (ino, old) = stale_atime_file(&fs);
    let mut buf = [0u8; 4];
    fs.read(ino, 0, &mut buf).unwrap();
    let first = fs.getattr(ino).unwrap().atime;
    assert!(first > old);
    fs.read(ino, 0, &mut buf).unwrap();
    assert!(
        fs.getattr(ino).unwrap().atime > first,
        "strictatime moves it again"
    );
    for (options, moves) in [("", true), ("strictatime", true), ("nodiratime", false)] {
        let opts = MountOptions::parse(&format!("clock=simulated,{options}")).unwrap();
        let (fs, _) = mount(fresh(8 << 20), opts).unwrap();
        let d = fs.mkdir(ROOT_INO, b"d", 0o755, ME).unwrap().ino;
        fs.mknod(d, b"e", FileKind::Regular, 0o644, 0, ME).unwrap();
        let set = SetAttr {
            atime: Some(amber_core::TimeSet::At(old)),
            ..Default::default()
        };
        fs.setattr(d, &set).unwrap();
        fs.readdir(d, 0, |_| true).unwrap();
        let after = fs.getattr(d).unwrap().atime;
        assert_eq!(
            after > old,
            moves,
            "{options:?}: listing moved atime {old:?} to {after:?}"
        );
    }
}

/// What the C ABI builds on: a file opened by inode with its own
/// resolution, written at an offset or at the end chosen per call.
#[test]
fn open_by_inode_and_write_at_end_per_call() {
    use amber_core::{Fs, OpenOptions};
    let dev = MmapDevice::anonymous(16 << 20, &MapOptions::default()).unwrap();
    Fs::format(&dev, &FormatParams::for_size(16 << 20)).unwrap();
    let (fs, _) = Fs::mount(dev, MountOptions::default()).unwrap();
    fs.write("/f", b"abc").unwrap();
    let ino = fs.metadata("/f").unwrap().attr().ino;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open_inode(&fs, ino)
        .unwrap();
    assert_eq!(f.write_to(b"Z", Some(1), false).unwrap(), (1, 1));
    assert_eq!(f.write_to(b"de", None, true).unwrap(), (2, 3));
    assert_eq!(fs.read("/f").unwrap(), b"aZcde");
    let ro = OpenOptions::new().read(true).open_inode(&fs, ino).unwrap();
    assert!(matches!(
        ro.write_to(b"x", None, false),
        Err(amber_core::FsError::BadHandle)
    ));
    OpenOptions::new()
        .write(true)
        .truncate(true)
        .open_inode(&fs, ino)
        .unwrap();
    assert_eq!(fs.metadata("/f").unwrap().len(), 0);
    let dir = fs.metadata("/").unwrap().attr().ino;
    assert!(matches!(
        OpenOptions::new().write(true).open_inode(&fs, dir),
        Err(amber_core::FsError::IsADirectory)
    ));
}
