//! The `amber` policy on a DRAM device: small overwrites through the zone
//! (durable and atomic on return), everything else into the data logs
//! with queued metadata, a file's queued blocks settled before the zone
//! backs one up, slices taken back before out-of-place writes, truncates
//! and growth, times made durable by fsync, and pools moving between
//! amber and hunter.

use amber_core::check::{check, CheckOptions};
use amber_core::{Fs, FsError, MountOptions, OpenOptions};
use amber_format::{FormatParams, PoolLayout};
use amber_pmem::{MapOptions, MmapDevice};
use amber_sim::{enumerate, CrashPoint, EnumConfig, OverlayDevice, RecordingDevice, SplitMix64};
use std::sync::{Arc, Mutex};

mod common;
use common::{assert_clean, classic_params, device_of, rw, seed, stat};

const POOL: u64 = 32 << 20;

fn fresh_device() -> MmapDevice {
    let dev = MmapDevice::anonymous(POOL, &MapOptions::default()).unwrap();
    let params = FormatParams {
        layout: PoolLayout::Split,
        ..FormatParams::for_size(POOL)
    };
    Fs::format(&dev, &params).unwrap();
    dev
}

/// Mounts with `policy=amber`, workers that never wake and the simulated
/// clock (every reading a new time), then `opts`.
fn mount(dev: MmapDevice, opts: &str) -> Fs<MmapDevice> {
    let o = MountOptions::parse(&format!(
        "policy=amber,hunter_interval=never,clock=simulated,{opts}"
    ))
    .unwrap();
    Fs::mount(dev, o).unwrap().0
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect()
}

/// Writes `data` at `off` into the file and the model.
fn put(f: &amber_core::File<MmapDevice>, model: &mut Vec<u8>, off: usize, data: &[u8]) {
    f.write_at(data, off as u64).unwrap();
    if model.len() < off + data.len() {
        model.resize(off + data.len(), 0);
    }
    model[off..off + data.len()].copy_from_slice(data);
}

/// `/f` with four blocks of a pattern, fsync'd: on PM, so small
/// overwrites of it go through the zone. Returns the file and its model.
fn four_synced_blocks(fs: &Fs<MmapDevice>) -> (amber_core::File<MmapDevice>, Vec<u8>) {
    let f = rw(fs, "/f");
    let mut model = Vec::new();
    put(&f, &mut model, 0, &pattern(16384, 1));
    f.sync_all().unwrap();
    (f, model)
}

/// A small overwrite of blocks already on PM goes through the zone and
/// is durable when it returns: a crash right after keeps it, with fsck
/// clean before and after recovery.
#[test]
fn small_overwrites_are_durable_on_return() {
    let fs = mount(fresh_device(), "");
    let (f, mut model) = four_synced_blocks(&fs);
    put(&f, &mut model, 100, &[9u8; 100]);
    put(&f, &mut model, 4000, &[8u8; 200]);
    put(&f, &mut model, 12288 + 64, &[7u8; 64]);
    assert_eq!(stat(&fs, "zone_writes"), 3);
    assert_eq!(stat(&fs, "settles"), 0);
    assert_eq!(fs.read("/f").unwrap(), model);
    drop(f);
    let dev = device_of(fs, false);
    let rep = check(&dev, &CheckOptions::default()).unwrap();
    assert!(rep.is_clean(), "fsck before recovery: {rep}");
    let fs = mount(dev, "");
    assert_eq!(fs.read("/f").unwrap(), model, "after the crash");
    let dev = device_of(fs, true);
    assert_clean(&dev);
}

/// A clean unmount writes every slice back into its file, so the next
/// mount (a single-process start among them) finds an empty zone and
/// builds no DRAM state for slices; the file reads the same after it.
#[test]
fn a_clean_unmount_empties_the_zone() {
    let fs = mount(fresh_device(), "");
    let (f, mut model) = four_synced_blocks(&fs);
    let mut rng = SplitMix64::new(seed("AMBER_UNMOUNT_SEED", 11, "unmount write-back"));
    for i in 0..500u64 {
        let off = (rng.next_u64() % 16000) as usize;
        let len = 1 + (rng.next_u64() % 300) as usize;
        put(&f, &mut model, off, &vec![i as u8; len.min(16384 - off)]);
    }
    assert!(
        fs.core().zone().unwrap().occupancy().1 > 0,
        "no write went to the zone"
    );
    drop(f);
    let fs = mount(device_of(fs, true), "");
    assert_eq!(
        fs.core().zone().unwrap().occupancy().1,
        0,
        "slices left after a clean unmount"
    );
    assert_eq!(fs.read("/f").unwrap(), model);
    assert_clean(&device_of(fs, true));
}

/// Chunks in each of the zone's two sub-zones.
fn chunks<D: amber_pmem::PmDevice>(fs: &Fs<D>) -> Vec<usize> {
    let z = fs.core().zone().unwrap();
    (0..2).map(|i| z.lock(i).chunks().len()).collect()
}

/// A clean unmount of a zone that grew writes every slice back and gives
/// the chunks growth added back to the pool (design.md §11.5). A crash at
/// any fence of that unmount leaves a pool whose recovery keeps the file
/// as written (every write durable on return) and checks clean; the
/// unmount itself leaves the zone its first four chunks a sub-zone, empty.
#[test]
fn an_unmount_emptying_a_grown_zone_is_crash_safe() {
    const OPTS: &str = "policy=amber,hunter_interval=never,clock=simulated,lawn_zone=1";
    let dev = RecordingDevice::new(POOL);
    let params = FormatParams {
        layout: PoolLayout::Split,
        ..FormatParams::for_size(POOL)
    };
    Fs::format(&dev, &params).unwrap();
    let (fs, _) = Fs::mount(dev, MountOptions::parse(OPTS).unwrap()).unwrap();
    let f = rw(&fs, "/f");
    let mut model = pattern(16384, 1);
    f.write_at(&model, 0).unwrap();
    f.sync_all().unwrap();
    let mut rng = SplitMix64::new(seed("AMBER_SHRINK_SEED", 5, "grown zone"));
    for i in 0..1500u64 {
        let off = (rng.next_u64() % 16000) as usize;
        let data = vec![i as u8; 128.min(16384 - off)];
        f.write_at(&data, off as u64).unwrap();
        model[off..off + data.len()].copy_from_slice(&data);
    }
    drop(f);
    assert!(
        chunks(&fs).iter().any(|&n| n > 4),
        "the zone never grew: {:?}",
        chunks(&fs)
    );
    let rec = Arc::clone(fs.core().device());
    let points: Arc<Mutex<Vec<CrashPoint>>> = Arc::default();
    let sink = Arc::clone(&points);
    rec.set_fence_hook(Some(Box::new(move |p: &CrashPoint| {
        sink.lock().unwrap().push(p.clone());
    })));
    rec.arm_fence_hook(true);
    fs.unmount().unwrap();
    rec.arm_fence_hook(false);
    let points = std::mem::take(&mut *points.lock().unwrap());
    assert!(!points.is_empty());
    for p in &points {
        for image in enumerate(p, &EnumConfig::default()).images {
            let dev = OverlayDevice::from_crash(p, &image);
            let (fs, _) = Fs::mount(dev, MountOptions::parse(OPTS).unwrap()).unwrap();
            assert_eq!(
                fs.read("/f").unwrap(),
                model,
                "after a crash in the unmount"
            );
            let dev = Arc::clone(fs.core().device());
            fs.unmount().unwrap();
            let r = check(&*dev, &CheckOptions { repair: false }).unwrap();
            assert!(r.is_clean(), "{r}");
        }
    }
    let dev = OverlayDevice::new(rec.durable_shared());
    let (fs, rep) = Fs::mount(dev, MountOptions::parse(OPTS).unwrap()).unwrap();
    assert!(rep.was_clean);
    assert_eq!(chunks(&fs), vec![4, 4], "the grown chunks stayed");
    assert_eq!(fs.core().zone().unwrap().occupancy().1, 0);
    assert_eq!(fs.read("/f").unwrap(), model);
}

/// A zone slice may back up only a block its file's durable metadata
/// names: a small overwrite of a block whose write is still queued
/// persists the file's queue first, so a crash keeps both writes.
#[test]
fn a_small_overwrite_settles_queued_blocks_first() {
    let fs = mount(fresh_device(), "");
    let f = rw(&fs, "/f");
    let mut model = Vec::new();
    put(&f, &mut model, 0, &pattern(8192, 2));
    assert!(stat(&fs, "pending") > 0);
    put(&f, &mut model, 10, &[5u8; 100]);
    assert_eq!(stat(&fs, "settles"), 1);
    assert_eq!(stat(&fs, "pending"), 0);
    put(&f, &mut model, 5000, &[6u8; 10]);
    assert_eq!(stat(&fs, "settles"), 1, "the file was settled already");
    drop(f);
    let dev = device_of(fs, false);
    let fs = mount(dev, "");
    assert_eq!(fs.read("/f").unwrap(), model);
    let dev = device_of(fs, true);
    assert_clean(&dev);
}

/// Seeded small overwrites, whole-block writes, appends and truncates
/// against a model: every path that moves or frees a block first takes
/// the zone's slices of it back, so reads, a clean remount, fsck and a
/// remount by hunter (which folds the zone back) all agree.
#[test]
fn mixed_writes_match_a_model() {
    let seed = seed("AMBER_SEED", 5, "amber model");
    let fs = mount(fresh_device(), "");
    let mut rng = SplitMix64::new(seed);
    let mut model: Vec<u8> = Vec::new();
    let f = rw(&fs, "/f");
    for step in 0..1500 {
        match rng.below(40) {
            0 => {
                let size = rng.below(120_000) as usize;
                f.set_len(size as u64).unwrap();
                model.resize(size, 0);
            }
            1..=3 => f.sync_all().unwrap(),
            4..=9 => {
                let fb = rng.below(30) as usize;
                let n = 1 + rng.below(3) as usize;
                let data: Vec<u8> = (0..n * 4096).map(|_| rng.next_u64() as u8).collect();
                put(&f, &mut model, fb * 4096, &data);
            }
            _ => {
                let len = 1 + rng.below(600) as usize;
                let off = rng.below(model.len() as u64 + 2000) as usize;
                let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                put(&f, &mut model, off, &data);
            }
        }
        if step % 100 == 0 {
            assert_eq!(fs.read("/f").unwrap(), model, "step {step}");
        }
    }
    assert_eq!(fs.read("/f").unwrap(), model);
    assert!(stat(&fs, "zone_writes") > 100, "the zone was hardly used");
    assert!(stat(&fs, "log_writes") > 100, "the logs were hardly used");
    drop(f);
    let dev = device_of(fs, true);
    assert_clean(&dev);
    let fs = mount(dev, "");
    assert_eq!(fs.read("/f").unwrap(), model, "after a clean remount");
    let dev = device_of(fs, true);
    let o = MountOptions::parse("policy=hunter,hunter_interval=never").unwrap();
    let fs = Fs::mount(dev, o).unwrap().0;
    assert_eq!(fs.read("/f").unwrap(), model, "folded back by hunter");
    let dev = device_of(fs, true);
    assert_clean(&dev);
}

/// A zone write changes the file's times in DRAM only; fsync puts them
/// in an attribute entry, so they survive a crash after it.
#[test]
fn fsync_makes_the_times_of_zone_writes_durable() {
    let fs = mount(fresh_device(), "");
    let f = rw(&fs, "/f");
    f.write_at(&pattern(4096, 3), 0).unwrap();
    f.sync_all().unwrap();
    let before = fs.metadata("/f").unwrap().modified();
    f.write_at(&[1u8; 10], 50).unwrap();
    assert_eq!(stat(&fs, "zone_writes"), 1);
    let after = fs.metadata("/f").unwrap().modified();
    assert!(after > before, "the write moved mtime");
    f.sync_all().unwrap();
    drop(f);
    let fs = mount(device_of(fs, false), "");
    assert_eq!(fs.metadata("/f").unwrap().modified(), after);
}

/// amber keeps the split layout: a classic pool is refused, whether
/// amber was asked for or came as the default, with what to do instead
/// (a classic policy, or a new pool from mkfs's defaults); and a classic
/// policy refuses amber's pool naming amber.
#[test]
fn layouts_must_match() {
    for opts in ["policy=amber", ""] {
        let dev = MmapDevice::anonymous(POOL, &MapOptions::default()).unwrap();
        Fs::format(&dev, &classic_params(POOL)).unwrap();
        match Fs::mount(dev, MountOptions::parse(opts).unwrap()) {
            Err(FsError::InvalidArgument(m)) => {
                assert!(m.contains("this pool has the classic layout"), "{m}");
                assert!(m.contains("made before amber was the default"), "{m}");
                assert!(m.contains("-o policy=direct"), "{m}");
                assert!(m.contains("new pool with `amberfs mkfs`"), "{m}");
            }
            other => panic!("{opts:?} mounted: {:?}", other.map(|_| ())),
        }
    }
    let o = MountOptions::parse("policy=lawn").unwrap();
    match Fs::mount(fresh_device(), o) {
        Err(FsError::InvalidArgument(m)) => assert!(m.contains("policy=amber"), "{m}"),
        other => panic!("mounted: {:?}", other.map(|_| ())),
    }
}

/// On the wall clock mount measures the device and sets how many slices
/// a small overwrite may have and still go through the zone: one with
/// that many goes there, one with more goes into the data log.
#[test]
fn the_calibrated_bound_routes_small_overwrites() {
    // The buffer off: whether it pays is the other half of the
    // calibration, and would take these writes under a loaded machine.
    let o = MountOptions::parse("policy=amber,hunter_interval=never,amber_buffer=never").unwrap();
    let fs = Fs::mount(fresh_device(), o).unwrap().0;
    assert!(stat(&fs, "line_ps") > 0 && stat(&fs, "flush_ps") > 0);
    let max = stat(&fs, "zone_max_slices");
    assert!(max <= 64, "{max}");
    let f = rw(&fs, "/f");
    let mut model = Vec::new();
    put(&f, &mut model, 0, &pattern(8192, 4));
    f.sync_all().unwrap();
    let (zone, log) = (stat(&fs, "zone_writes"), stat(&fs, "log_writes"));
    eprintln!(
        "zone_max_slices {max}, line {} ps, flush {} ps",
        stat(&fs, "line_ps"),
        stat(&fs, "flush_ps")
    );
    if max > 0 {
        let k = max.min(63) as usize;
        put(&f, &mut model, 64, &pattern(k * 64, 5));
        assert_eq!(stat(&fs, "zone_writes"), zone + 1, "{k} slices");
    }
    if max < 63 {
        put(
            &f,
            &mut model,
            4096 + 64,
            &pattern((max as usize + 1) * 64, 6),
        );
        assert_eq!(stat(&fs, "log_writes"), log + 1, "{} slices", max + 1);
    }
    assert_eq!(fs.read("/f").unwrap(), model);
}

/// `user.amberfs.policy` shows what amber did with a file: its blocks in
/// the log, whether its metadata waits, which blocks have slices in the
/// zone and the rule that sent them; it is read-only and never listed.
#[test]
fn the_policy_report_shows_where_a_files_data_is() {
    use amber_core::fs::XattrSet;
    let fs = mount(fresh_device(), "");
    let f = rw(&fs, "/f");
    f.write_at(&pattern(16384, 7), 0).unwrap();
    let c = fs.core();
    let name = b"user.amberfs.policy";
    let text = |ino| String::from_utf8(c.getxattr(ino, name).unwrap()).unwrap();
    let t = text(f.ino());
    assert!(t.starts_with("policy=amber\n"), "{t}");
    assert!(
        t.contains("log_blocks=4\n") && t.contains("metadata=queued\n"),
        "{t}"
    );
    assert!(t.contains("zone_slices=0\n"), "{t}");
    f.write_at(&[1u8; 10], 4096 + 5).unwrap();
    f.write_at(&[1u8; 10], 3 * 4096 + 70).unwrap();
    let t = text(f.ino());
    assert!(
        t.contains("metadata=durable\n"),
        "settled by the zone write: {t}"
    );
    assert!(t.contains("zone_slices=2\nzone_blocks=1,3\n"), "{t}");
    assert!(t.contains("pool.zone_writes=2\n"), "{t}");
    assert!(!c.listxattr(f.ino()).unwrap().iter().any(|n| n == name));
    let e = c
        .setxattr(f.ino(), name, b"x", XattrSet::Either)
        .unwrap_err();
    assert!(
        matches!(e, FsError::InvalidArgument(m) if m.contains("read-only")),
        "{e}"
    );
}

/// Mounts amber with every write that may persist lazily buffered.
fn mount_buffered(dev: MmapDevice, opts: &str) -> Fs<MmapDevice> {
    mount(dev, &format!("amber_buffer=always,{opts}"))
}

/// The file's buffered block count, from its policy report.
fn buffered_blocks(fs: &Fs<MmapDevice>, ino: u64) -> u64 {
    let c = fs.core();
    let t = String::from_utf8(c.getxattr(ino, b"user.amberfs.policy").unwrap()).unwrap();
    t.lines()
        .find_map(|l| l.strip_prefix("buffered_blocks="))
        .unwrap_or_else(|| panic!("no buffered_blocks in {t}"))
        .parse()
        .unwrap()
}

/// A buffered small overwrite of blocks the file holds on PM, its size
/// unchanged, goes back in place under one journal transaction (design
/// §18): WAL frames and a lone header do; a change that grew the file, one
/// over a hole and one of more than two blocks' worth of lines go out of
/// place. Everything fsync'd is there after a crash, and fsck is clean.
#[test]
fn small_buffered_overwrites_go_back_in_place() {
    let fs = mount_buffered(fresh_device(), "");
    let (f, mut model) = four_synced_blocks(&fs);
    let in_place = |fs: &Fs<MmapDevice>| stat(fs, "buffer_in_place_write_backs");
    let before = in_place(&fs);
    for (i, at) in [32usize, 4152, 32].into_iter().enumerate() {
        put(&f, &mut model, at, &pattern(24, 10 + i as u8));
        put(&f, &mut model, at + 24, &pattern(4096, 20 + i as u8));
        f.sync_data().unwrap();
    }
    put(&f, &mut model, 0, &pattern(32, 30));
    f.sync_data().unwrap();
    assert_eq!(in_place(&fs), before + 4, "three frames and a header");
    // Past the size, over a hole, and more than two blocks' lines.
    put(&f, &mut model, 16380, &pattern(10, 31));
    f.sync_data().unwrap();
    put(&f, &mut model, 9 * 4096, &pattern(100, 32));
    f.sync_data().unwrap();
    put(&f, &mut model, 5 * 4096, &pattern(10, 33));
    f.sync_data().unwrap();
    put(&f, &mut model, 100, &pattern(9000, 34));
    f.sync_data().unwrap();
    assert_eq!(in_place(&fs), before + 4, "none of those in place");
    put(&f, &mut model, 4000, &pattern(200, 35));
    f.sync_data().unwrap();
    assert_eq!(in_place(&fs), before + 5);
    assert_eq!(fs.read("/f").unwrap(), model);
    drop(f);
    let dev = device_of(fs, false);
    let fs = mount_buffered(dev, "");
    assert_eq!(fs.read("/f").unwrap(), model, "fsync'd, then a crash");
    assert_clean(&device_of(fs, true));
}

/// Buffered writes and appends are read back at once (over the blocks
/// on PM, and as zeros in a hole below the size), SEEK_DATA/SEEK_HOLE
/// see them, and nothing of them reaches the data logs until fsync.
#[test]
fn buffered_writes_are_read_back_and_written_back_by_fsync() {
    let fs = mount_buffered(fresh_device(), "");
    let f = rw(&fs, "/f");
    let mut model = Vec::new();
    put(&f, &mut model, 0, &pattern(8192, 1));
    put(&f, &mut model, 100, &[9u8; 100]);
    put(&f, &mut model, 5 * 4096 + 7, &pattern(3000, 2));
    assert_eq!(stat(&fs, "buffered_writes"), 3);
    assert_eq!(stat(&fs, "log_writes") + stat(&fs, "zone_writes"), 0);
    assert_eq!(buffered_blocks(&fs, f.ino()), 3);
    assert_eq!(stat(&fs, "buffer_bytes_held"), 3 * 4096);
    assert_eq!(fs.read("/f").unwrap(), model);
    let c = fs.core();
    assert_eq!(c.seek_data(f.ino(), 8192, true).unwrap(), 5 * 4096);
    assert_eq!(c.seek_data(f.ino(), 0, false).unwrap(), 8192);
    f.sync_all().unwrap();
    assert_eq!(buffered_blocks(&fs, f.ino()), 0);
    assert_eq!(stat(&fs, "buffer_write_backs"), 1);
    assert_eq!(stat(&fs, "buffer_blocks_written_back"), 3);
    assert_eq!(
        stat(&fs, "buffer_bytes_held"),
        4096,
        "the tail block stays, clean"
    );
    assert_eq!(fs.read("/f").unwrap(), model);
    drop(f);
    let dev = device_of(fs, false);
    let fs = mount_buffered(dev, "");
    assert_eq!(fs.read("/f").unwrap(), model, "fsync'd, then a crash");
    let dev = device_of(fs, true);
    assert_clean(&dev);
}

/// A crash loses only what was buffered since the last fsync, all of
/// it (one change per write-back): the file comes back as it was synced,
/// with its synced size, never with zeros where data was synced.
#[test]
fn a_crash_loses_only_unsynced_buffered_writes() {
    let fs = mount_buffered(fresh_device(), "");
    let f = rw(&fs, "/f");
    let mut model = Vec::new();
    put(&f, &mut model, 0, &pattern(10000, 3));
    f.sync_all().unwrap();
    let synced = model.clone();
    put(&f, &mut model, 50, &[1u8; 5000]);
    put(&f, &mut model, 10000, &pattern(20000, 4));
    assert_eq!(fs.read("/f").unwrap(), model);
    assert!(buffered_blocks(&fs, f.ino()) > 0);
    drop(f);
    let dev = device_of(fs, false);
    let rep = check(&dev, &CheckOptions::default()).unwrap();
    assert!(rep.is_clean(), "fsck before recovery: {rep}");
    let fs = mount_buffered(dev, "");
    assert_eq!(fs.read("/f").unwrap(), synced, "the synced state, whole");
    let dev = device_of(fs, true);
    assert_clean(&dev);
}

/// A file set to durability=lazy keeps its buffer across fsync (write-back
/// waits for the background, syncfs or unmount); one set to sync, and an
/// O_SYNC handle, bypass the buffer.
#[test]
fn lazy_files_keep_the_buffer_and_sync_writes_bypass_it() {
    use amber_core::fs::XattrSet;
    let fs = mount_buffered(fresh_device(), "");
    let c = fs.core();
    let dur = b"user.amberfs.durability";
    let lazy = rw(&fs, "/lazy");
    c.setxattr(lazy.ino(), dur, b"lazy", XattrSet::Either)
        .unwrap();
    lazy.write_at(&pattern(4096, 5), 0).unwrap();
    lazy.sync_all().unwrap();
    assert_eq!(buffered_blocks(&fs, lazy.ino()), 1, "fsync left it");
    let sync = rw(&fs, "/sync");
    c.setxattr(sync.ino(), dur, b"sync", XattrSet::Either)
        .unwrap();
    sync.write_at(&pattern(4096, 6), 0).unwrap();
    assert_eq!(buffered_blocks(&fs, sync.ino()), 0);
    let osync = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .sync(true)
        .open(&fs, "/osync")
        .unwrap();
    osync.write_at(&pattern(100, 7), 0).unwrap();
    assert_eq!(buffered_blocks(&fs, osync.ino()), 0);
    assert_eq!(stat(&fs, "buffered_writes"), 1);
    fs.core().sync_all().unwrap();
    assert_eq!(buffered_blocks(&fs, lazy.ino()), 0, "syncfs wrote it back");
    drop((lazy, sync, osync));
    let dev = device_of(fs, false);
    let fs = mount_buffered(dev, "");
    assert_eq!(fs.read("/lazy").unwrap(), pattern(4096, 5));
    assert_eq!(fs.read("/sync").unwrap(), pattern(4096, 6));
    assert_eq!(fs.read("/osync").unwrap(), pattern(100, 7));
    let dev = device_of(fs, true);
    assert_clean(&dev);
}

/// A truncate, a zone write and a log write after buffered data each
/// write the file's buffer back first, so the newest bytes win and a
/// crash right after keeps what each of them made durable.
#[test]
fn truncate_and_unbuffered_writes_come_after_the_buffer() {
    let fs = mount_buffered(fresh_device(), "");
    let f = rw(&fs, "/f");
    let mut model = Vec::new();
    put(&f, &mut model, 0, &pattern(4 * 4096, 8));
    f.set_len(3 * 4096 + 10).unwrap();
    model.truncate(3 * 4096 + 10);
    assert_eq!(buffered_blocks(&fs, f.ino()), 0, "truncate wrote it back");
    assert_eq!(fs.read("/f").unwrap(), model);
    // Buffered, then an O_SYNC small overwrite (the zone) of another
    // block, then an O_SYNC whole block (the data log).
    put(&f, &mut model, 200, &[1u8; 300]);
    let s = OpenOptions::new()
        .read(true)
        .write(true)
        .sync(true)
        .open(&fs, "/f")
        .unwrap();
    put(&s, &mut model, 4096 + 3, &[2u8; 50]);
    assert_eq!(buffered_blocks(&fs, f.ino()), 0);
    assert_eq!(stat(&fs, "zone_writes"), 1);
    put(&f, &mut model, 300, &[3u8; 10]);
    put(&s, &mut model, 2 * 4096, &pattern(4096, 9));
    assert_eq!(buffered_blocks(&fs, f.ino()), 0);
    assert_eq!(stat(&fs, "log_writes"), 1);
    assert_eq!(fs.read("/f").unwrap(), model);
    drop((f, s));
    let dev = device_of(fs, false);
    let fs = mount_buffered(dev, "");
    assert_eq!(
        fs.read("/f").unwrap(),
        model,
        "each write-back was persisted"
    );
    let dev = device_of(fs, true);
    assert_clean(&dev);
}

/// The buffer never holds more than `buffer=` (1 MiB: 256 blocks): a
/// writer past it writes back the files with the oldest data, its own
/// included, and a write larger than the whole buffer goes unbuffered.
#[test]
fn the_buffer_stays_within_its_capacity() {
    let fs = mount_buffered(fresh_device(), "buffer=1M");
    let cap = 1 << 20;
    let mut model = Vec::new();
    let a = rw(&fs, "/a");
    let b = rw(&fs, "/b");
    let mut mb = Vec::new();
    for i in 0..48 {
        put(&a, &mut model, i * 65536, &pattern(65536, i as u8));
        put(&b, &mut mb, i * 4096, &pattern(4096, i as u8 ^ 0x55));
        assert!(stat(&fs, "buffer_bytes_held") <= cap);
    }
    assert!(stat(&fs, "buffer_write_backs") > 0);
    put(&a, &mut model, 0, &pattern(2 << 20, 0x33));
    assert_eq!(stat(&fs, "buffer_full_unbuffered"), 1);
    assert!(stat(&fs, "buffer_bytes_held") <= cap);
    assert_eq!(fs.read("/a").unwrap(), model);
    assert_eq!(fs.read("/b").unwrap(), mb);
    drop((a, b));
    let dev = device_of(fs, true);
    assert_clean(&dev);
    let fs = mount_buffered(dev, "");
    assert_eq!(
        fs.read("/a").unwrap(),
        model,
        "unmount wrote every file back"
    );
    assert_eq!(fs.read("/b").unwrap(), mb);
    let dev = device_of(fs, true);
    assert_clean(&dev);
}

/// Block images are reused once their blocks leave the buffer (written
/// back, or the file freed): a reused image never shows the bytes it held
/// before, past the size, in a gap, or beside a partial write.
#[test]
fn reused_images_show_none_of_their_old_bytes() {
    let fs = mount_buffered(fresh_device(), "");
    let a = rw(&fs, "/a");
    a.write_at(&[0xAA; 4 * 4096], 0).unwrap();
    a.sync_all().unwrap();
    let d = rw(&fs, "/d");
    d.write_at(&[0xDD; 2 * 4096], 0).unwrap();
    drop(d);
    fs.remove_file("/d").unwrap();
    assert_eq!(
        stat(&fs, "buffer_bytes_held"),
        4096,
        "only /a's tail block, clean, kept by its fsync"
    );
    let b = rw(&fs, "/b");
    let mut model = Vec::new();
    put(&b, &mut model, 10, &[1u8; 100]);
    put(&b, &mut model, 5000, &[2u8; 10]);
    put(&b, &mut model, 3 * 4096 + 4000, &[3u8; 200]);
    assert_eq!(buffered_blocks(&fs, b.ino()), 4);
    assert_eq!(fs.read("/b").unwrap(), model);
    // A partial overwrite of a block on PM keeps the block's bytes.
    let mut ma = vec![0xAA; 4 * 4096];
    put(&a, &mut ma, 4096 + 7, &[4u8; 9]);
    assert_eq!(fs.read("/a").unwrap(), ma);
    b.set_len(4096 + 3).unwrap();
    model.truncate(4096 + 3);
    put(&b, &mut model, 3 * 4096, &[5u8; 1]);
    assert_eq!(fs.read("/b").unwrap(), model, "after a shrink and a regrow");
    drop((a, b));
    let dev = device_of(fs, true);
    assert_clean(&dev);
    let fs = mount_buffered(dev, "");
    assert_eq!(fs.read("/a").unwrap(), ma);
    assert_eq!(fs.read("/b").unwrap(), model);
}

/// SQLite's WAL frames over a fsync'd file on DRAM-speed PM (`auto`,
/// which buffers nothing for its own sake there): each page straddles a
/// block boundary just past its 24-byte header, with more slices than the
/// zone takes, so the buffer coalesces it; the fsync keeps the tail block
/// clean, so the next header goes into it and nothing else reaches the
/// zone or the data logs between fsyncs. A crash after the last fsync
/// loses nothing; a small write elsewhere drops the clean block.
#[test]
fn wal_frames_coalesce_in_the_buffer() {
    let fs = mount(fresh_device(), "amber_zone_max=8");
    let f = rw(&fs, "/wal");
    let mut model = Vec::new();
    put(&f, &mut model, 0, &pattern(16 * 4096, 1));
    f.sync_all().unwrap();
    let frames = 12;
    for k in 0..frames {
        let at = 32 + k * 4120;
        put(&f, &mut model, at, &pattern(24, 2 + k as u8));
        put(&f, &mut model, at + 24, &pattern(4096, 40 + k as u8));
        f.sync_all().unwrap();
        assert_eq!(buffered_blocks(&fs, f.ino()), 0, "frame {k} written back");
        assert_eq!(fs.read("/wal").unwrap(), model, "frame {k}");
    }
    // Only the first header found no block to join.
    assert_eq!(stat(&fs, "zone_writes"), 1);
    assert_eq!(stat(&fs, "buffered_writes"), 2 * frames as u64 - 1);
    assert_eq!(stat(&fs, "buffer_bytes_held"), 4096, "the clean tail block");
    put(&f, &mut model, 15 * 4096 + 9, &[7u8; 9]);
    assert_eq!(stat(&fs, "zone_writes"), 2, "a small write elsewhere");
    assert_eq!(stat(&fs, "buffer_bytes_held"), 0, "dropped the clean block");
    drop(f);
    let dev = device_of(fs, false);
    let fs = mount(dev, "amber_zone_max=8");
    assert_eq!(fs.read("/wal").unwrap(), model, "after a crash");
    let dev = device_of(fs, true);
    assert_clean(&dev);
}

/// A chmod writes the buffer back before it commits the inode, and that
/// write-back first writes back the zone's slices of the buffered blocks,
/// raising the file's floor: the inode committed must keep the raised
/// floor, or its dead head lives again (and, past a later smaller size,
/// the pool no longer mounts).
#[test]
fn a_chmod_after_a_write_back_keeps_the_zones_floor() {
    let fs = mount(fresh_device(), "amber_zone_max=8");
    let f = rw(&fs, "/f");
    let mut model = Vec::new();
    put(&f, &mut model, 0, &pattern(6 * 4096, 1));
    f.sync_all().unwrap();
    put(&f, &mut model, 3 * 4096 + 22, &[5u8; 44]);
    assert_eq!(stat(&fs, "zone_writes"), 1);
    put(&f, &mut model, 2 * 4096 + 1000, &pattern(5000, 2));
    assert_eq!(buffered_blocks(&fs, f.ino()), 2);
    let set = amber_core::SetAttr {
        perm: Some(0o600),
        ..amber_core::SetAttr::default()
    };
    fs.core().setattr(f.ino(), &set).unwrap();
    assert_eq!(buffered_blocks(&fs, f.ino()), 0, "chmod wrote it back");
    f.set_len(5000).unwrap();
    model.truncate(5000);
    drop(f);
    let dev = device_of(fs, true);
    assert_clean(&dev);
    let fs = mount(dev, "amber_zone_max=8");
    assert_eq!(fs.read("/f").unwrap(), model);
}

/// Seeded buffered writes, appends, truncates, fsyncs and unlinks against
/// a model, with the write-back step run in between; a clean remount and
/// fsck agree.
#[test]
fn buffered_mixed_operations_match_a_model() {
    let seed = seed("AMBER_SEED", 11, "amber buffer model");
    let fs = mount_buffered(fresh_device(), "buffer=1M");
    let mut rng = SplitMix64::new(seed);
    let mut model: Vec<u8> = Vec::new();
    let f = rw(&fs, "/f");
    for step in 0..800 {
        match rng.below(20) {
            0 => {
                let size = rng.below(100_000) as usize;
                f.set_len(size as u64).unwrap();
                model.resize(size, 0);
            }
            1 => f.sync_all().unwrap(),
            2 => {
                fs.core().write_back(rng.below(64)).unwrap();
            }
            3 => {
                let g = rw(&fs, "/g");
                g.write_at(&pattern(5000, step as u8), 0).unwrap();
                drop(g);
                fs.remove_file("/g").unwrap();
            }
            _ => {
                let off = rng.below(90_000) as usize;
                let len = 1 + rng.below(9000) as usize;
                put(&f, &mut model, off, &pattern(len, step as u8));
            }
        }
        if step % 50 == 0 {
            assert_eq!(fs.read("/f").unwrap(), model, "step {step}, seed {seed}");
        }
    }
    assert_eq!(fs.read("/f").unwrap(), model, "seed {seed}");
    drop(f);
    let dev = device_of(fs, true);
    assert_clean(&dev);
    let fs = mount_buffered(dev, "");
    assert_eq!(fs.read("/f").unwrap(), model, "seed {seed}");
}

/// amber is the library's default: a pool formatted with the default
/// parameters mounts with the default options, under amber. (Where its
/// writes go then depends on the calibration at mount, which a test does
/// not assert on.)
#[test]
fn defaults_are_amber() {
    let dev = MmapDevice::anonymous(POOL, &MapOptions::default()).unwrap();
    Fs::format(&dev, &FormatParams::for_size(POOL)).unwrap();
    let (fs, _) = Fs::mount(dev, MountOptions::default()).unwrap();
    let f = rw(&fs, "/f");
    f.write_at(&pattern(4096, 1), 0).unwrap();
    f.sync_all().unwrap();
    f.write_at(&[9u8; 10], 100).unwrap();
    let report = fs.core().getxattr(f.ino(), b"user.amberfs.policy").unwrap();
    assert!(report.starts_with(b"policy=amber\n"));
    let mut want = pattern(4096, 1);
    want[100..110].fill(9);
    assert_eq!(fs.read("/f").unwrap(), want);
    drop(f);
    assert_clean(&device_of(fs, true));
}

/// Slots freed in DRAM keep their entries on PM until reused (LAWN's
/// superseded descriptors; the one-fence zone's heads under their file's
/// floor); on a cleanly unmounted pool fsck says so, and does not blame
/// interrupted writes.
#[test]
fn fsck_names_superseded_descriptors_on_a_clean_pool() {
    for (zone, says) in [
        ("lawn", "superseded slices"),
        ("extents", "written-back extents"),
    ] {
        superseded_entries_are_named(&format!("amber_zone={zone}"), says);
    }
}

fn superseded_entries_are_named(opts: &str, says: &str) {
    let fs = mount(fresh_device(), opts);
    let (f, mut model) = four_synced_blocks(&fs);
    // Two-slice writes, again and again over the same slices (a write's
    // superseded slots are doomed), then a whole block over some of them
    // (its slices go back to the file first).
    for round in 0..6u8 {
        for i in 0..8 {
            put(&f, &mut model, i * 512, &pattern(128, round));
        }
    }
    put(&f, &mut model, 0, &pattern(4096, 9));
    f.sync_all().unwrap();
    drop(f);
    let dev = device_of(fs, true);
    let rep = check(&dev, &CheckOptions::default()).unwrap();
    assert!(rep.is_clean(), "{rep}");
    let notes: Vec<&str> = rep.problems.iter().map(|p| p.what.as_str()).collect();
    assert!(notes.iter().any(|n| n.contains(says)), "{opts}: {notes:?}");
    assert!(
        !notes.iter().any(|n| n.contains("interrupted")),
        "{opts}: {notes:?}"
    );
    let fs = mount(dev, opts);
    assert_eq!(fs.read("/f").unwrap(), model);
}

/// Where the calibration at mount finds buffering pays (here the `pcm`
/// preset's slow writes), an fsync of a directory must leave the
/// directory's own state alone. It gave the directory a buffer's
/// per-file state, and the next change of the directory stored a block
/// count of 0: the root's entries were lost at the next mount (found by
/// bench/preload.sh under pcm: sqlite3 fsyncs its database's directory).
#[test]
fn fsync_of_a_directory_where_buffering_pays() {
    use amber_core::Core;
    use amber_pmem::{Emulated, EmulatorSpec};
    let dev = Emulated::new(fresh_device(), EmulatorSpec::pcm());
    let (fs, _) = Fs::mount(dev, MountOptions::default()).unwrap();
    fs.create_dir("/d").unwrap();
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .open(&fs, "/d/j")
        .unwrap();
    f.write_at(b"journal", 0).unwrap();
    f.sync_all().unwrap();
    let core: &Core<_> = fs.core();
    let (root, d) = (
        amber_format::ROOT_INO,
        fs.metadata("/d").unwrap().attr().ino,
    );
    core.fsync(root).unwrap();
    core.fsync(d).unwrap();
    drop(f);
    fs.remove_file("/d/j").unwrap();
    fs.write("/d/db", b"database").unwrap();
    let dev = fs.core().device().clone();
    fs.unmount().unwrap();
    let rep = check(&*dev, &CheckOptions::default()).unwrap();
    assert!(rep.is_clean(), "fsck: {rep}");
}
