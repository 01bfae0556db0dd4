//! Per-file durability and atomicity (`user.amberfs.durability`,
//! `user.amberfs.atomicity`): values persist across unmount and crash,
//! pass to new files and directories, bad values and names are refused
//! with the valid ones named, `atomicity=write` only where the policy can
//! honour it, `sync` under a buffering policy survives a crash the moment
//! a write returns, and `lazy` leaves fsync'd data to write-back.

use amber_core::fs::XattrSet;
use amber_core::{Atomicity, Durability, Fs, FsError, MountOptions, OpenOptions};
use amber_format::{FormatParams, PoolLayout};
use amber_pmem::{MapOptions, MmapDevice};

mod common;
use common::{assert_clean, device_of, stat};

const POOL: u64 = 32 << 20;
const DUR: &[u8] = b"user.amberfs.durability";
const ATOM: &[u8] = b"user.amberfs.atomicity";
/// hinfs with its buffer always used and its background write-back far
/// beyond any test: nothing is written back unless the test asks.
const HINFS: &str = "policy=hinfs,buffering=always,writeback_interval=86400s,writeback_age=86400s";

fn fresh_device(layout: PoolLayout) -> MmapDevice {
    let dev = MmapDevice::anonymous(POOL, &MapOptions::default()).unwrap();
    let params = FormatParams {
        layout,
        ..FormatParams::for_size(POOL)
    };
    Fs::format(&dev, &params).unwrap();
    dev
}

fn mount(dev: MmapDevice, opts: &str) -> Fs<MmapDevice> {
    Fs::mount(dev, MountOptions::parse(opts).unwrap())
        .unwrap()
        .0
}

fn mount_fresh(opts: &str) -> Fs<MmapDevice> {
    mount(fresh_device(PoolLayout::Classic), opts)
}

/// Unmounts cleanly (`clean`) or crashes (drops DRAM), and mounts again.
fn remount(fs: Fs<MmapDevice>, opts: &str, clean: bool) -> Fs<MmapDevice> {
    mount(device_of(fs, clean), opts)
}

fn ino(fs: &Fs<MmapDevice>, p: &str) -> u64 {
    fs.symlink_metadata(p).unwrap().attr().ino
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed) | 1)
        .collect()
}

#[test]
fn values_pass_to_new_files_and_directories_and_persist() {
    let fs = mount_fresh("policy=direct");
    fs.create_dir("/d").unwrap();
    fs.set_durability("/d", Durability::Sync).unwrap();
    fs.write("/before", b"x").unwrap();
    fs.create_dir_all("/d/sub/deeper").unwrap();
    fs.write("/d/f", b"f").unwrap();
    fs.write("/d/sub/deeper/g", b"g").unwrap();
    fs.symlink("f", "/d/l").unwrap();
    fs.create_dir("/z").unwrap();
    fs.set_durability("/z", Durability::Lazy).unwrap();
    fs.set_atomicity("/z", Atomicity::None).unwrap();
    fs.write("/z/h", b"h").unwrap();
    let check = |fs: &Fs<MmapDevice>| {
        for p in ["/d", "/d/f", "/d/sub", "/d/sub/deeper", "/d/sub/deeper/g"] {
            assert_eq!(fs.durability(p).unwrap(), Durability::Sync, "{p}");
            assert_eq!(fs.atomicity(p).unwrap(), Atomicity::None, "{p}");
        }
        let c = fs.core();
        assert_eq!(c.getxattr(ino(fs, "/d/f"), DUR).unwrap(), b"sync");
        // A symlink takes no user. attributes, as on Linux.
        let l = ino(fs, "/d/l");
        assert_eq!(c.durability(l).unwrap(), Durability::Posix);
        assert_eq!(c.getxattr(l, DUR), Err(FsError::NoAttribute));
        // Only files created after the attribute was set inherit it, and
        // only the non-default values pass on.
        assert_eq!(fs.durability("/before").unwrap(), Durability::Posix);
        assert_eq!(fs.durability("/z/h").unwrap(), Durability::Lazy);
        assert_eq!(c.getxattr(ino(fs, "/z/h"), ATOM), Err(FsError::NoAttribute));
    };
    check(&fs);
    let fs = remount(fs, "policy=direct", true);
    check(&fs);
    let fs = remount(fs, "policy=direct", false);
    check(&fs);
    // Removing the attribute returns the file to the default, for good.
    let f = ino(&fs, "/d/f");
    fs.core().removexattr(f, DUR).unwrap();
    assert_eq!(fs.durability("/d/f").unwrap(), Durability::Posix);
    let fs = remount(fs, "policy=direct", true);
    assert_eq!(fs.durability("/d/f").unwrap(), Durability::Posix);
    assert_eq!(fs.durability("/d/sub").unwrap(), Durability::Sync);
    let dev = device_of(fs, true);
    assert_clean(&dev);
}

#[test]
fn bad_values_and_names_are_refused_naming_the_valid_ones() {
    let fs = mount_fresh("policy=direct");
    fs.write("/f", b"f").unwrap();
    fs.symlink("f", "/l").unwrap();
    let c = fs.core();
    let f = ino(&fs, "/f");
    let set = |name: &[u8], v: &[u8]| c.setxattr(f, name, v, XattrSet::Either);
    for bad in [&b"fast"[..], b"SYNC", b"", b"sync\n\n", b"lazy "] {
        match set(DUR, bad) {
            Err(e @ FsError::InvalidArgument(_)) => {
                assert!(e.to_string().contains("posix, sync or lazy"), "{e}")
            }
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    match set(ATOM, b"block") {
        Err(e @ FsError::InvalidArgument(_)) => {
            assert!(e.to_string().contains("write or none"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    match set(b"user.amberfs.speed", b"fast") {
        Err(e @ FsError::InvalidArgument(_)) => {
            let t = e.to_string();
            assert!(t.contains("user.amberfs.durability"), "{t}");
            assert!(t.contains("user.amberfs.atomicity"), "{t}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        c.setxattr(ino(&fs, "/l"), DUR, b"sync", XattrSet::Either),
        Err(FsError::InvalidArgument(_))
    ));
    assert_eq!(c.listxattr(f).unwrap(), Vec::<Vec<u8>>::new());
    // One trailing NUL or newline is forgiven; the bare word is stored.
    set(DUR, b"lazy\n").unwrap();
    assert_eq!(c.getxattr(f, DUR).unwrap(), b"lazy");
    set(DUR, b"sync\0").unwrap();
    assert_eq!(c.getxattr(f, DUR).unwrap(), b"sync");
    assert_eq!(fs.durability("/f").unwrap(), Durability::Sync);
    // A refused value leaves the old one.
    assert!(set(DUR, b"never").is_err());
    assert_eq!(fs.durability("/f").unwrap(), Durability::Sync);
    // The create/replace flags behave as for any attribute.
    assert_eq!(
        c.setxattr(f, DUR, b"posix", XattrSet::Create),
        Err(FsError::AlreadyExists)
    );
    assert_eq!(
        c.setxattr(f, ATOM, b"none", XattrSet::Replace),
        Err(FsError::NoAttribute)
    );
    fs.unmount().unwrap();
}

#[test]
fn atomicity_write_only_where_every_write_is_atomic() {
    for (policy, accepted) in [
        ("direct", false),
        ("hinfs", false),
        ("cow", true),
        ("finelog", true),
        ("lawn", true),
    ] {
        let fs = mount_fresh(&format!("policy={policy}"));
        fs.write("/f", b"f").unwrap();
        let r = fs.set_atomicity("/f", Atomicity::Write);
        if accepted {
            r.unwrap();
            assert_eq!(fs.atomicity("/f").unwrap(), Atomicity::Write, "{policy}");
        } else {
            match r {
                Err(e @ FsError::Unsupported(_)) => {
                    let t = e.to_string();
                    assert!(t.contains("cow, finelog, lawn or nova"), "{policy}: {t}");
                }
                other => panic!("{policy}: {other:?}"),
            }
            assert_eq!(fs.atomicity("/f").unwrap(), Atomicity::None, "{policy}");
        }
        fs.set_atomicity("/f", Atomicity::None).unwrap();
        fs.unmount().unwrap();
    }
}

#[test]
fn sync_files_under_hinfs_are_durable_when_a_write_returns() {
    let fs = mount_fresh(HINFS);
    fs.create_dir("/s").unwrap();
    fs.set_durability("/s", Durability::Sync).unwrap();
    let f = fs.create("/s/f").unwrap();
    let p = fs.create("/p").unwrap();
    let mut m = pattern(10_000, 1);
    f.write_at(&m, 0).unwrap();
    p.write_at(&m, 0).unwrap();
    let lazy = stat(&fs, "lazy_writes");
    assert!(lazy > 0, "the posix file is buffered");
    // Overwrites inside blocks and an append past the end, never fsync'd.
    for (off, len, seed) in [(5usize, 10usize, 2u8), (4090, 20, 3), (9_990, 3_000, 4)] {
        let d = pattern(len, seed);
        f.write_at(&d, off as u64).unwrap();
        if m.len() < off + len {
            m.resize(off + len, 0);
        }
        m[off..off + len].copy_from_slice(&d);
    }
    assert_eq!(
        stat(&fs, "lazy_writes"),
        lazy,
        "no write to /s/f was buffered"
    );
    let mtime = f.metadata().unwrap().modified();
    drop((f, p));
    let fs = remount(fs, HINFS, false);
    assert_eq!(fs.read("/s/f").unwrap(), m);
    assert_eq!(fs.metadata("/s/f").unwrap().modified(), mtime, "times too");
    assert!(fs.read("/p").unwrap().len() < 10_000, "posix data was lost");
    fs.unmount().unwrap();
}

#[test]
fn lazy_files_under_hinfs_wait_for_write_back_even_after_fsync() {
    let fs = mount_fresh(HINFS);
    fs.write("/posix", b"").unwrap();
    fs.write("/lazy", b"").unwrap();
    fs.set_durability("/lazy", Durability::Lazy).unwrap();
    let data = pattern(9_000, 5);
    let open = |p| OpenOptions::new().write(true).open(&fs, p).unwrap();
    let (l, p) = (open("/lazy"), open("/posix"));
    l.write_at(&data, 0).unwrap();
    assert!(stat(&fs, "lazy_writes") > 0);
    let fsyncs = stat(&fs, "fsyncs");
    l.sync_all().unwrap();
    l.sync_data().unwrap();
    assert_eq!(
        stat(&fs, "fsyncs"),
        fsyncs,
        "fsync left the lazy file alone"
    );
    assert_eq!(stat(&fs, "blocks_written_back"), 0);
    p.write_at(&data, 0).unwrap();
    p.sync_all().unwrap();
    drop((l, p));
    let fs = remount(fs, HINFS, false);
    assert_eq!(fs.read("/lazy").unwrap(), b"", "a crash lost the lazy data");
    assert_eq!(fs.read("/posix").unwrap(), data, "posix: fsync'd, kept");
    // Unmount (as syncfs) makes it durable.
    let l = OpenOptions::new().write(true).open(&fs, "/lazy").unwrap();
    l.write_at(&data, 0).unwrap();
    l.sync_all().unwrap();
    drop(l);
    let fs = remount(fs, HINFS, true);
    assert_eq!(fs.read("/lazy").unwrap(), data);
    // So does the policy's write-back.
    fs.write("/lazy", &pattern(9_000, 6)).unwrap();
    assert!(fs.core().write_back(u64::MAX).unwrap() > 0);
    let fs = remount(fs, HINFS, false);
    assert_eq!(fs.read("/lazy").unwrap(), pattern(9_000, 6));
    fs.unmount().unwrap();
}

#[test]
fn lazy_files_under_hunter_leave_fsync_to_the_queues() {
    let opts = "policy=hunter,hunter_interval=never";
    let fs = mount(fresh_device(PoolLayout::Split), opts);
    fs.write("/lazy", b"").unwrap();
    fs.write("/posix", b"").unwrap();
    fs.set_durability("/lazy", Durability::Lazy).unwrap();
    let data = pattern(9_000, 7);
    for p in ["/lazy", "/posix"] {
        let f = OpenOptions::new().write(true).open(&fs, p).unwrap();
        f.write_at(&data, 0).unwrap();
        f.sync_all().unwrap();
    }
    let fs = remount(fs, opts, false);
    assert_eq!(
        fs.read("/lazy").unwrap(),
        b"",
        "the queued metadata was lost"
    );
    assert_eq!(fs.read("/posix").unwrap(), data);
    let f = OpenOptions::new().write(true).open(&fs, "/lazy").unwrap();
    f.write_at(&data, 0).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let fs = remount(fs, opts, true);
    assert_eq!(fs.read("/lazy").unwrap(), data, "unmount persisted it");
    fs.unmount().unwrap();
}

#[test]
fn durable_on_return_policies_ignore_lazy() {
    let fs = mount_fresh("policy=direct");
    fs.write("/f", b"").unwrap();
    fs.set_durability("/f", Durability::Lazy).unwrap();
    let f = OpenOptions::new().write(true).open(&fs, "/f").unwrap();
    f.write_at(&pattern(5_000, 8), 0).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let fs = remount(fs, "policy=direct", false);
    assert_eq!(fs.read("/f").unwrap(), pattern(5_000, 8));
    fs.unmount().unwrap();
}
