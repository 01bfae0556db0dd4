//! Read-only mounts: every file reads as written (through the small-write
//! zone too), every change is refused with `FsError::ReadOnly`, and the
//! pool is left byte for byte as it was, not even marked mounted. A pool
//! that needs recovery is refused on a device that takes no stores and
//! recovered in DRAM over a `DramOverlay`.

use std::path::{Path, PathBuf};

use amber_core::data::FallocMode;
use amber_core::fs::XattrSet;
use amber_core::{Fs, FsError, MountOptions, OpenOptions, Owner, SetAttr};
use amber_format::FormatParams;
use amber_pmem::{DramOverlay, MapOptions, MmapDevice, PmDevice};

mod common;
use common::{classic_params, device_of, rw, stat};

const POOL: u64 = 32 << 20;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13) ^ seed)
        .collect()
}

fn opts(text: &str) -> MountOptions {
    MountOptions::parse(&format!("clock=simulated,hunter_interval=never,{text}")).unwrap()
}

/// What the files of `populate` hold.
struct Expected {
    a: Vec<u8>,
    b: Vec<u8>,
}

/// Writes `/a` (four fsync'd blocks, then small overwrites the zone
/// keeps), `/d/b`, a symlink and an xattr under `policy`.
fn populate(fs: &Fs<MmapDevice>) -> Expected {
    let f = rw(fs, "/a");
    let mut a = pattern(16384, 1);
    f.write_at(&a, 0).unwrap();
    f.sync_all().unwrap();
    for (off, byte) in [(100usize, 9u8), (5000, 8), (12300, 7)] {
        f.write_at(&[byte; 64], off as u64).unwrap();
        a[off..off + 64].fill(byte);
    }
    drop(f);
    let b = pattern(70_000, 2);
    fs.create_dir("/d").unwrap();
    let f = rw(fs, "/d/b");
    f.write_at(&b, 0).unwrap();
    f.sync_all().unwrap();
    drop(f);
    fs.symlink("/d/b", "/l").unwrap();
    let ino = fs.metadata("/a").unwrap().attr().ino;
    fs.core()
        .setxattr(ino, b"user.k", b"v", XattrSet::Either)
        .unwrap();
    Expected { a, b }
}

/// A pool file in /dev/shm made by `params`, populated under `policy`
/// and unmounted cleanly (`clean`) or dropped as if the process died.
fn pool(dir: &Path, params: &FormatParams, policy: &str, clean: bool) -> (PathBuf, Expected) {
    let path = dir.join("ro.pool");
    let dev = MmapDevice::create(&path, POOL, &MapOptions::default()).unwrap();
    Fs::format(&dev, params).unwrap();
    let (fs, _) = Fs::mount(dev, opts(&format!("policy={policy}"))).unwrap();
    let want = populate(&fs);
    if policy != "direct" {
        assert!(stat(&fs, "to_zone") > 0, "no slice went to the zone");
    }
    drop(device_of(fs, clean));
    (path, want)
}

fn read_only_device(path: &Path) -> MmapDevice {
    MmapDevice::open_read_only(path, &MapOptions::default()).unwrap()
}

fn shm() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").unwrap()
}

fn check_contents<D: PmDevice>(fs: &Fs<D>, want: &Expected) {
    assert!(fs.read("/a").unwrap() == want.a, "/a with its zone slices");
    assert!(fs.read("/d/b").unwrap() == want.b, "/d/b");
    assert_eq!(fs.read_link("/l").unwrap(), "/d/b");
    let ino = fs.metadata("/a").unwrap().attr().ino;
    assert_eq!(fs.core().getxattr(ino, b"user.k").unwrap(), b"v");
}

/// Every kind of change, each expected to fail with ReadOnly.
fn every_change_is_refused<D: PmDevice>(fs: &Fs<D>) {
    let core = fs.core();
    let a = fs.metadata("/a").unwrap().attr().ino;
    let root = fs.metadata("/").unwrap().attr().ino;
    let owner = Owner::new(0, 0);
    let refused: Vec<(&str, Result<(), FsError>)> = vec![
        ("write", core.write(a, Some(0), b"x", false).map(|_| ())),
        ("append", core.write(a, None, b"x", true).map(|_| ())),
        ("create", fs.write("/new", b"x")),
        ("mkdir", fs.create_dir("/nd")),
        ("symlink", core.symlink(root, b"s", b"t", owner).map(|_| ())),
        ("link", fs.hard_link("/a", "/a2")),
        ("unlink", fs.remove_file("/a")),
        ("rmdir", fs.remove_dir("/d")),
        ("rename", fs.rename("/a", "/z")),
        (
            "truncate",
            core.setattr(
                a,
                &SetAttr {
                    size: Some(0),
                    ..Default::default()
                },
            )
            .map(|_| ()),
        ),
        (
            "setxattr",
            core.setxattr(a, b"user.n", b"1", XattrSet::Either),
        ),
        ("removexattr", core.removexattr(a, b"user.k")),
        (
            "fallocate",
            core.fallocate(a, 0, 4096, FallocMode::Allocate { keep_size: false }),
        ),
        (
            "zero range",
            core.fallocate(a, 0, 4096, FallocMode::ZeroRange { keep_size: true }),
        ),
        ("chattr", core.set_flags(a, 0).map(|_| ())),
        (
            "rename with a whiteout",
            core.rename_whiteout(root, b"a", root, b"w", false, owner),
        ),
        ("write_back", core.write_back(10).map(|_| ())),
        (
            "open for writing",
            OpenOptions::new().write(true).open(fs, "/a").map(|_| ()),
        ),
    ];
    for (what, r) in refused {
        assert_eq!(r, Err(FsError::ReadOnly), "{what}");
    }
    core.fsync(a).expect("fsync of a read-only mount");
    core.sync_all().expect("syncfs of a read-only mount");
}

/// Reads every file, tries every change, and unmounts; returns the
/// device for a look at what was stored.
fn use_read_only<D: PmDevice>(fs: Fs<D>, want: &Expected) -> std::sync::Arc<D> {
    check_contents(&fs, want);
    every_change_is_refused(&fs);
    let dev = fs.core().device().clone();
    fs.unmount().unwrap();
    dev
}

fn assert_unchanged(path: &Path, before: &[u8]) {
    assert!(std::fs::read(path).unwrap() == before, "the pool changed");
}

#[test]
fn a_read_only_mount_reads_everything_and_writes_nothing() {
    let dir = shm();
    let (path, want) = pool(dir.path(), &FormatParams::for_size(POOL), "amber", true);
    let before = std::fs::read(&path).unwrap();
    let (fs, report) = Fs::mount(read_only_device(&path), opts("ro")).unwrap();
    assert!(report.was_clean);
    assert!(fs.core().is_read_only());
    assert!(
        fs.core().zone().is_some(),
        "the pool's zone is read through"
    );
    let dev = use_read_only(fs, &want);
    // A refused store would make this drain fail: none was even tried.
    dev.drain().expect("a store reached the read-only device");
    assert_eq!(dev.stats().bytes_written(), 0);
    drop(dev);
    assert_unchanged(&path, &before);
}

#[test]
fn ro_on_a_writable_device_writes_nothing_either() {
    let dir = shm();
    let (path, want) = pool(dir.path(), &FormatParams::for_size(POOL), "amber", true);
    let before = std::fs::read(&path).unwrap();
    let dev = MmapDevice::open(&path, &MapOptions::default()).unwrap();
    let (fs, _) = Fs::mount(dev, opts("ro")).unwrap();
    let dev = use_read_only(fs, &want);
    assert_eq!(dev.stats().bytes_written(), 0);
    drop(dev);
    assert_unchanged(&path, &before);
}

#[test]
fn a_read_only_device_needs_the_ro_option() {
    let dir = shm();
    let (path, _) = pool(dir.path(), &FormatParams::for_size(POOL), "amber", true);
    let before = std::fs::read(&path).unwrap();
    match Fs::mount(read_only_device(&path), opts("")) {
        Err(FsError::InvalidArgument(why)) => assert!(why.contains("ro option"), "{why}"),
        Err(e) => panic!("wrong refusal: {e}"),
        Ok(_) => panic!("mounted a read-only device read-write"),
    }
    assert_unchanged(&path, &before);
}

#[test]
fn a_pool_needing_recovery_is_refused_and_salvage_recovers_it_in_dram() {
    let dir = shm();
    let (path, want) = pool(dir.path(), &FormatParams::for_size(POOL), "amber", false);
    let before = std::fs::read(&path).unwrap();
    match Fs::mount(read_only_device(&path), opts("ro")) {
        Err(e @ FsError::NeedsRecovery) => {
            let text = e.to_string();
            assert!(
                text.contains("fsck --repair") && text.contains("salvage"),
                "{text}"
            );
        }
        Err(e) => panic!("wrong refusal: {e}"),
        Ok(_) => panic!("a read-only mount guessed at a pool that needs recovery"),
    }
    let overlay = DramOverlay::new(read_only_device(&path), 64 << 20);
    let (fs, notes) = Fs::salvage(overlay).unwrap();
    assert!(
        notes.iter().any(|n| n.contains("recovered after a crash")),
        "{notes:?}"
    );
    assert!(fs.core().is_read_only());
    // Everything was fsync'd, written through the zone (durable on
    // return) or a metadata operation (durable on return).
    drop(use_read_only(fs, &want));
    assert_unchanged(&path, &before);
}

#[test]
fn a_classic_pool_with_a_zone_is_read_through_it() {
    let dir = shm();
    let (path, want) = pool(dir.path(), &classic_params(POOL), "lawn", true);
    let before = std::fs::read(&path).unwrap();
    match Fs::mount(read_only_device(&path), opts("ro,policy=direct")) {
        Err(FsError::InvalidArgument(why)) => assert!(why.contains("policy=lawn"), "{why}"),
        Err(e) => panic!("wrong refusal: {e}"),
        Ok(_) => panic!("direct would not show the zone's slices"),
    }
    // Another slot size asks for a new zone; read-only reads the pool's.
    let (fs, _) = Fs::mount(
        read_only_device(&path),
        opts("ro,policy=lawn,lawn_slot=256"),
    )
    .unwrap();
    drop(use_read_only(fs, &want));
    assert_unchanged(&path, &before);
}

#[test]
fn a_pool_that_never_had_a_zone_reads_without_one() {
    let dir = shm();
    let path = dir.path().join("fresh.pool");
    let dev = MmapDevice::create(&path, POOL, &MapOptions::default()).unwrap();
    Fs::format(&dev, &FormatParams::for_size(POOL)).unwrap();
    drop(dev);
    let (fs, _) = Fs::mount(read_only_device(&path), opts("ro")).unwrap();
    assert!(fs.core().zone().is_none());
    assert!(fs.read_dir("/").unwrap().is_empty());
    assert_eq!(fs.write("/x", b"1"), Err(FsError::ReadOnly));
    fs.unmount().unwrap();
}
