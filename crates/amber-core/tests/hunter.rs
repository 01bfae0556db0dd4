//! The hunter policies on a DRAM device: writes against a byte model with
//! metadata left queued, fsync and clean unmount making it durable, what
//! a crash keeps (fsync'd data) and drops (unpersisted updates), the
//! chain that lets a clean mount skip the scan, gap-write when the pool
//! fills, bounded queues, the workers, and layouts that do not match the
//! policy refused.

use amber_core::check::{check, CheckOptions};
use amber_core::data::FallocMode;
use amber_core::{Fs, FsError, MountOptions};
use amber_format::split::{LogicalInfo, SplitRegions};
use amber_format::{FormatParams, PoolLayout, Superblock, BLOCK_SIZE};
use amber_pmem::{MapOptions, MmapDevice, PmDevice};
use amber_sim::{enumerate, CrashPoint, EnumConfig, OverlayDevice, RecordingDevice, SplitMix64};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;
use common::{assert_clean, classic_params, device_of, rw, seed, stat};

const POOL: u64 = 32 << 20;

fn fresh_device_as(size: u64, layout: PoolLayout) -> MmapDevice {
    let dev = MmapDevice::anonymous(size, &MapOptions::default()).unwrap();
    let params = FormatParams {
        layout,
        ..FormatParams::for_size(size)
    };
    Fs::format(&dev, &params).unwrap();
    dev
}

fn fresh_device(size: u64) -> MmapDevice {
    fresh_device_as(size, PoolLayout::Split)
}

/// Mounts with `opts` after `policy=hunter,hunter_interval=never`, so
/// nothing is persisted behind the test's back unless it asks (a policy
/// in `opts` wins).
fn mount(dev: MmapDevice, opts: &str) -> Fs<MmapDevice> {
    let o = MountOptions::parse(&format!("policy=hunter,hunter_interval=never,{opts}")).unwrap();
    Fs::mount(dev, o).unwrap().0
}

/// Seeded writes of every size and alignment, holes, appends and
/// truncates against a model; then a clean unmount, a remount that
/// follows the chains, and fsck.
#[test]
fn writes_match_a_model_across_unmount_and_remount() {
    model_run(PoolLayout::Split, "");
}

/// The same under amber, whose small overwrites go through the zone.
#[test]
fn amber_writes_match_a_model_across_unmount_and_remount() {
    model_run(PoolLayout::Split, "policy=amber,amber_buffer=never");
}

/// The same with the records in the data log (hunter-lfs), whose record
/// runs break at every summary block.
#[test]
fn lfs_writes_match_a_model_across_unmount_and_remount() {
    model_run(PoolLayout::Lfs, "policy=hunter-lfs");
}

fn model_run(layout: PoolLayout, opts: &str) {
    let seed = seed(
        "AMBER_HUNTER_SEED",
        11,
        &format!("hunter model ({layout:?})"),
    );
    let fs = mount(fresh_device_as(POOL, layout), opts);
    let mut rng = SplitMix64::new(seed);
    let mut model: Vec<u8> = Vec::new();
    let f = rw(&fs, "/f");
    for step in 0..600 {
        match rng.below(20) {
            0 => {
                let size = rng.below(200_000) as usize;
                f.set_len(size as u64).unwrap();
                model.resize(size, 0);
            }
            1 => f.sync_all().unwrap(),
            _ => {
                let len = match rng.below(4) {
                    0 => 1 + rng.below(20_000) as usize,
                    _ => 1 + rng.below(5000) as usize,
                };
                let off = rng.below(model.len() as u64 + 30_000) as usize;
                let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                f.write_at(&data, off as u64).unwrap();
                if model.len() < off + len {
                    model.resize(off + len, 0);
                }
                model[off..off + len].copy_from_slice(&data);
            }
        }
        if step % 60 == 0 {
            assert_eq!(fs.read("/f").unwrap(), model, "step {step}");
        }
    }
    assert_eq!(fs.read("/f").unwrap(), model);
    // Writes below other blocks left links stale, for unmount to rewrite.
    let report = fs.core().getxattr(f.ino(), b"user.amberfs.policy").unwrap();
    let report = String::from_utf8(report).unwrap();
    assert!(report.contains("chain=stale from block"), "{report}");
    drop(f);
    let dev = device_of(fs, true);
    assert_clean(&dev);
    let fs = mount(dev, opts);
    assert_eq!(fs.read("/f").unwrap(), model, "after a clean remount");
    assert_eq!(fs.metadata("/f").unwrap().len(), model.len() as u64);
    let dev = device_of(fs, true);
    assert_clean(&dev);
}

/// Metadata waits in DRAM: a crash keeps what fsync made durable and
/// drops the rest, whole blocks at a time, and recovery leaves fsck
/// clean.
#[test]
fn a_crash_keeps_what_fsync_persisted() {
    let fs = mount(fresh_device(POOL), "");
    let f = rw(&fs, "/f");
    f.write_at(&[1u8; 3 * 4096], 0).unwrap();
    f.sync_all().unwrap();
    f.write_at(&[2u8; 4096], 4096).unwrap();
    f.write_at(&[3u8; 100], 3 * 4096).unwrap();
    assert!(stat(&fs, "pending") > 0);
    let g = rw(&fs, "/never-synced");
    g.write_at(&[4u8; 5000], 0).unwrap();
    drop((f, g));
    let dev = device_of(fs, false);
    let rep = check(&dev, &CheckOptions::default()).unwrap();
    assert!(rep.is_clean(), "fsck before recovery: {rep}");
    let (fs, rec) = Fs::mount(
        dev,
        MountOptions::parse("policy=hunter,hunter_interval=never").unwrap(),
    )
    .unwrap();
    assert!(!rec.was_clean);
    assert_eq!(fs.read("/f").unwrap(), vec![1u8; 3 * 4096]);
    assert_eq!(fs.read("/never-synced").unwrap(), Vec::<u8>::new());
    let dev = device_of(fs, true);
    assert_clean(&dev);
}

/// A worker wakes on its interval and persists the queues: afterwards a
/// crash loses nothing.
#[test]
fn workers_persist_on_their_interval() {
    let dev = fresh_device(POOL);
    let o = MountOptions::parse("policy=hunter,hunter_interval=20ms").unwrap();
    let fs = Fs::mount(dev, o).unwrap().0;
    fs.write("/f", &[7u8; 10_000]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while stat(&fs, "pending") > 0 {
        assert!(Instant::now() < deadline, "the worker never ran");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(stat(&fs, "worker_turns") > 0);
    let dev = device_of(fs, false);
    let fs = mount(dev, "");
    assert_eq!(fs.read("/f").unwrap(), vec![7u8; 10_000]);
}

/// Files read back from PM are history for the index pre-allocation: a
/// remount that opens many small existing files, and never fsyncs or
/// deletes one, gives the default `hunter_index` to the first only — and
/// only once it is written: a file only read takes what it maps.
#[test]
fn opening_small_files_sizes_their_indexes_by_what_was_opened() {
    let dev = fresh_device(POOL);
    let fs = mount(dev, "");
    for i in 0..64 {
        fs.write(&format!("/f{i}"), &[i as u8; 3 * BLOCK_SIZE as usize])
            .unwrap();
    }
    let dev = device_of(fs, true);
    let fs = mount(dev, "hunter_index=1M");
    for i in 0..64 {
        assert_eq!(fs.read(&format!("/f{i}")).unwrap()[0], i as u8);
    }
    let bytes = stat(&fs, "index_bytes");
    assert!(bytes <= 64 * 64, "{bytes} bytes of index for 64 files read");
    for i in 0..64 {
        rw(&fs, &format!("/f{i}"))
            .write_at(&[1; BLOCK_SIZE as usize], 3 * BLOCK_SIZE)
            .unwrap();
    }
    let bytes = stat(&fs, "index_bytes");
    assert!(
        bytes < (1 << 20) + 64 * 64,
        "{bytes} bytes of index for 64 files of 4 blocks"
    );
    assert!(bytes >= 1 << 20, "the first file opened gets the default");
}

/// hunter-sync persists every write before it returns.
#[test]
fn hunter_sync_is_durable_on_return() {
    let dev = fresh_device(POOL);
    let fs = Fs::mount(dev, MountOptions::parse("policy=hunter-sync").unwrap())
        .unwrap()
        .0;
    assert!(fs.core().policy_durable_on_return());
    fs.write("/f", b"hello, hunter").unwrap();
    assert_eq!(stat(&fs, "pending"), 0);
    let dev = device_of(fs, false);
    let fs = mount(dev, "");
    assert_eq!(fs.read("/f").unwrap(), b"hello, hunter");
}

/// A write's blocks, consecutive in the data log, queue as ONE update
/// that stands for a record per block: a 64 KiB write pushes one update,
/// not 16, and persisting it writes 16 records that a crash keeps.
#[test]
fn a_run_of_blocks_queues_as_one_update() {
    let fs = mount(fresh_device(POOL), "");
    let f = rw(&fs, "/f");
    let data: Vec<u8> = (0..64 << 10).map(|i: u32| (i / 4096) as u8).collect();
    f.write_at(&data, 0).unwrap();
    assert_eq!(stat(&fs, "pending"), 1);
    f.write_at(&data[..8192], 4096).unwrap();
    assert_eq!(
        stat(&fs, "pending"),
        3,
        "two blocks and a free run (the link above waits for unmount)"
    );
    f.sync_all().unwrap();
    assert_eq!(stat(&fs, "records"), 18);
    drop(f);
    let dev = device_of(fs, false);
    let fs = mount(dev, "");
    let mut want = data.clone();
    want[4096..12288].copy_from_slice(&data[..8192]);
    assert_eq!(fs.read("/f").unwrap(), want);
    let dev = device_of(fs, true);
    assert_clean(&dev);
}

/// fsync and settle skip a shard with nothing queued or being persisted
/// (no lock taken), so every push must wake them: a write queued after
/// the shard went idle, and the frees a delete queues, are persisted by
/// the next fsync, and a crash keeps them.
#[test]
fn an_fsync_after_the_queue_went_idle_persists_what_came_next() {
    let fs = mount(fresh_device(POOL), "hunter_queues=1");
    let f = rw(&fs, "/f");
    f.write_at(&[1; 4096], 0).unwrap();
    f.sync_all().unwrap();
    let batches = stat(&fs, "batches");
    f.sync_all().unwrap();
    assert_eq!(stat(&fs, "batches"), batches, "nothing was queued");
    f.write_at(&[2; 8192], 4096).unwrap();
    f.sync_all().unwrap();
    assert_eq!(stat(&fs, "batches"), batches + 1);
    assert_eq!(stat(&fs, "pending"), 0);
    fs.write("/gone", &[3; 8192]).unwrap();
    fs.remove_file("/gone").unwrap();
    assert!(stat(&fs, "pending") > 0, "the delete's frees are queued");
    f.sync_all().unwrap();
    assert_eq!(
        stat(&fs, "pending"),
        0,
        "one queue: fsync took the frees too"
    );
    drop(f);
    let fs = mount(device_of(fs, false), "");
    let mut want = vec![1; 4096];
    want.extend([2; 8192]);
    assert_eq!(fs.read("/f").unwrap(), want);
    assert!(fs.metadata("/gone").is_err());
    assert_clean(&device_of(fs, true));
}

/// An fsync'd overwrite leaves its old block's record for the queue's
/// next persist (design.md §12.3: two metadata fences, not three); a
/// crash before then keeps the newer block, and syncfs and unmount leave
/// no record of a freed block behind.
#[test]
fn an_overwrites_old_record_is_cleared_by_the_next_persist() {
    let fs = mount(fresh_device(POOL), "hunter_queues=1");
    let f = rw(&fs, "/f");
    f.write_at(&[1; 4096], 0).unwrap();
    f.sync_all().unwrap();
    let freed = stat(&fs, "freed");
    f.write_at(&[2; 4096], 0).unwrap();
    f.sync_all().unwrap();
    assert_eq!(stat(&fs, "freed"), freed, "the old block waits");
    f.write_at(&[3; 4096], 4096).unwrap();
    f.sync_all().unwrap();
    assert_eq!(
        stat(&fs, "freed"),
        freed + 1,
        "cleared with the next records"
    );
    f.write_at(&[4; 4096], 0).unwrap();
    f.sync_all().unwrap();
    fs.core().sync_all().unwrap();
    assert_eq!(stat(&fs, "freed"), freed + 2, "syncfs frees what waits");
    f.write_at(&[5; 4096], 0).unwrap();
    f.sync_all().unwrap();
    drop(f);
    // A crash with a deferred block: the newer one wins.
    let fs = mount(device_of(fs, false), "");
    let mut want = vec![5; 4096];
    want.extend([3; 4096]);
    assert_eq!(fs.read("/f").unwrap(), want);
    let f = rw(&fs, "/f");
    f.write_at(&[6; 4096], 4096).unwrap();
    f.sync_all().unwrap();
    drop(f);
    // A clean unmount with a deferred block: fsck finds no stale record.
    let fs = mount(device_of(fs, true), "");
    want[4096..].fill(6);
    assert_eq!(fs.read("/f").unwrap(), want);
    assert_clean(&device_of(fs, true));
}

/// Sequential appends extend one queued update (design §12.2 step 5),
/// whose records a persist writes like any other run's.
#[test]
fn sequential_appends_queue_one_update() {
    let fs = mount(fresh_device(POOL), "hunter_interval=never");
    let f = rw(&fs, "/f");
    for i in 0..100u64 {
        f.write_at(&[i as u8; 4096], i * 4096).unwrap();
    }
    assert_eq!(stat(&fs, "pending"), 1);
    f.sync_all().unwrap();
    drop(f);
    let fs = mount(device_of(fs, false), "");
    let got = fs.read("/f").unwrap();
    assert_eq!(got.len(), 100 * 4096);
    for (i, chunk) in got.chunks(4096).enumerate() {
        assert!(chunk.iter().all(|&b| b == i as u8), "block {i}");
    }
    assert_clean(&device_of(fs, true));
}

/// A queue never holds more than its bound: the writer persists it.
#[test]
fn a_full_queue_is_persisted_by_its_writer() {
    let fs = mount(fresh_device(POOL), "hunter_queue=8");
    let f = rw(&fs, "/f");
    for i in 0..100u64 {
        // Written twice: the overwrite queues a free behind its run, so
        // the next append does not extend the queue's last update
        // (design §12.2 step 5) and every write adds updates.
        for _ in 0..2 {
            f.write_at(&[i as u8; 4096], i * 4096).unwrap();
            assert!(stat(&fs, "pending") <= 8);
        }
    }
    assert!(stat(&fs, "full_queue_persists") > 0);
    drop(f);
    let dev = device_of(fs, false);
    let fs = mount(dev, "");
    // Whatever was persisted is a prefix of the writes.
    let got = fs.read("/f").unwrap();
    assert!(got.len() >= 90 * 4096, "only {} bytes survived", got.len());
    for (i, chunk) in got.chunks(4096).enumerate() {
        assert!(chunk.iter().all(|&b| b == i as u8), "block {i}");
    }
}

/// Overwrites and deletes leave invalid blocks behind; when the pool is
/// full the queued frees are persisted and the gaps reused, so a pool
/// can be rewritten many times over without a cleaner.
#[test]
fn gap_write_reuses_freed_space() {
    let size = 16 << 20;
    let fs = mount(fresh_device(size), "");
    let free = fs.statfs().blocks_free;
    let chunk = vec![5u8; (free as usize / 3) * BLOCK_SIZE as usize];
    for round in 0..10 {
        let name = format!("/f{}", round % 2);
        fs.write(&name, &chunk).unwrap();
        if round % 3 == 0 {
            fs.remove_file(&name).unwrap();
        }
    }
    let f = rw(&fs, "/hot");
    for i in 0..(3 * free) {
        f.write_at(&[i as u8; 4096], (i % 16) * 4096).unwrap();
    }
    assert!(stat(&fs, "gap_runs") > 0, "no gap was ever reused");
    drop(f);
    let dev = device_of(fs, true);
    assert_clean(&dev);
}

#[test]
fn layouts_and_policies_must_match() {
    let classic = MmapDevice::anonymous(POOL, &MapOptions::default()).unwrap();
    Fs::format(&classic, &classic_params(POOL)).unwrap();
    let e = mount_error(classic, MountOptions::parse("policy=hunter").unwrap());
    assert!(
        e.to_string()
            .contains("(and hunter, hunter-sync) cannot use"),
        "{e}"
    );
    assert!(
        e.to_string().contains("`amberfs mkfs` (split layout"),
        "{e}"
    );
    let e = mount_error(
        fresh_device(POOL),
        MountOptions::parse("policy=direct").unwrap(),
    );
    assert!(e.to_string().contains("hunter or hunter-sync"), "{e}");
    assert!(e.to_string().contains("mkfs --layout classic"), "{e}");
}

/// `-o sync` makes every write durable on return whatever front end
/// calls the core (the FUSE adapter's writes come straight to it): a
/// crash right after keeps them.
#[test]
fn sync_mount_writes_are_durable_through_the_core() {
    let fs = mount(fresh_device(POOL), "sync");
    let f = rw(&fs, "/f");
    let c = fs.core();
    c.write(f.ino(), Some(0), &[6u8; 5000], false).unwrap();
    assert_eq!(stat(&fs, "pending"), 0);
    drop(f);
    let dev = device_of(fs, false);
    let fs = mount(dev, "");
    assert_eq!(fs.read("/f").unwrap(), vec![6u8; 5000]);
}

/// fallocate under hunter and amber: allocation fills holes below the
/// size with zeroed blocks (none past it with KEEP_SIZE), a punch zeroes
/// its edges and frees its whole blocks, SEEK_HOLE sees the hole, and
/// both are durable on return: a crash right after keeps them, with fsck
/// clean before and after recovery.
#[test]
fn fallocate_fills_holes_and_punches_durably() {
    for opts in [
        "",
        "policy=amber,amber_buffer=never",
        "policy=amber,amber_buffer=always",
    ] {
        let fs = mount(fresh_device(POOL), opts);
        let c = fs.core();
        let f = rw(&fs, "/f");
        let mut model = vec![7u8; 100];
        f.write_at(&model, 0).unwrap();
        let keep = FallocMode::Allocate { keep_size: true };
        let grow = FallocMode::Allocate { keep_size: false };
        c.fallocate(f.ino(), 0, 3 * 4096, grow).unwrap();
        model.resize(3 * 4096, 0);
        assert_eq!(c.getattr(f.ino()).unwrap().blocks, 3 * 8, "{opts}");
        c.fallocate(f.ino(), 1 << 20, 4096, keep).unwrap();
        assert_eq!(c.getattr(f.ino()).unwrap().size, 3 * 4096, "{opts}");
        assert_eq!(c.getattr(f.ino()).unwrap().blocks, 3 * 8, "{opts}");
        // A grown size over a hole: the hole below the new end is filled.
        c.fallocate(f.ino(), 5 * 4096, 100, grow).unwrap();
        model.resize(5 * 4096 + 100, 0);
        assert_eq!(c.getattr(f.ino()).unwrap().blocks, 4 * 8, "{opts}");
        let data: Vec<u8> = (0..5 * 4096 + 100).map(|i| (i % 251) as u8 + 1).collect();
        f.write_at(&data, 0).unwrap();
        model.copy_from_slice(&data);
        // A small overwrite (amber's zone) inside the range to punch.
        f.write_at(&[3u8; 64], 4096 + 128).unwrap();
        model[4096 + 128..4096 + 192].fill(3);
        c.fallocate(f.ino(), 100, 3 * 4096, FallocMode::PunchHole)
            .unwrap();
        model[100..100 + 3 * 4096].fill(0);
        assert_eq!(fs.read("/f").unwrap(), model, "{opts}");
        assert_eq!(c.getattr(f.ino()).unwrap().blocks, 4 * 8, "{opts}");
        assert_eq!(c.seek_data(f.ino(), 0, false).unwrap(), 4096, "{opts}");
        assert_eq!(c.seek_data(f.ino(), 4096, true).unwrap(), 3 * 4096);
        // More than the pool holds: refused before anything changes.
        let e = c.fallocate(f.ino(), 0, 1 << 40, grow).unwrap_err();
        assert!(matches!(e, FsError::NoSpace), "{opts}: {e}");
        assert_eq!(c.getattr(f.ino()).unwrap().size, model.len() as u64);
        drop(f);
        let dev = device_of(fs, false);
        let rep = check(&dev, &CheckOptions::default()).unwrap();
        assert!(rep.is_clean(), "{opts}: fsck before recovery: {rep}");
        let fs = mount(dev, opts);
        assert_eq!(fs.read("/f").unwrap(), model, "{opts}: after a crash");
        let dev = device_of(fs, true);
        assert_clean(&dev);
    }
}

/// A fallocate range that is empty or past the largest file is refused
/// before any policy acts on it: amber's buffer is not written back for
/// it.
#[test]
fn a_bad_fallocate_range_is_refused_before_anything_moves() {
    let fs = mount(fresh_device(POOL), "policy=amber,amber_buffer=always");
    let c = fs.core();
    let f = rw(&fs, "/f");
    f.write_at(&[5u8; 10_000], 0).unwrap();
    let grow = FallocMode::Allocate { keep_size: false };
    for (off, len) in [(0, 0), (u64::MAX, 2), (1 << 62, 1 << 62)] {
        let e = c.fallocate(f.ino(), off, len, grow).unwrap_err();
        assert!(matches!(e, FsError::InvalidArgument(_)), "{off}+{len}: {e}");
        let e = c
            .fallocate(f.ino(), off, len, FallocMode::PunchHole)
            .unwrap_err();
        assert!(matches!(e, FsError::InvalidArgument(_)), "{off}+{len}: {e}");
    }
    assert_eq!(stat(&fs, "buffer_write_backs"), 0);
    assert_eq!(fs.read("/f").unwrap(), vec![5u8; 10_000]);
}

/// The error a mount fails with.
fn mount_error(dev: MmapDevice, opts: MountOptions) -> FsError {
    match Fs::mount(dev, opts) {
        Ok(_) => panic!("the mount succeeded"),
        Err(e) => e,
    }
}

/// Two threads writing two files.
#[test]
fn concurrent_writers() {
    let fs = Arc::new(mount(fresh_device(POOL), ""));
    let handles: Vec<_> = (0..2u8)
        .map(|t| {
            let fs = Arc::clone(&fs);
            std::thread::spawn(move || {
                let f = rw(&fs, &format!("/t{t}"));
                for i in 0..300u64 {
                    f.write_at(&[t.wrapping_add(i as u8); 1000], i * 1000)
                        .unwrap();
                }
                f.sync_all().unwrap();
            })
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
    for t in 0..2u8 {
        let got = fs.read(&format!("/t{t}")).unwrap();
        assert_eq!(got.len(), 300_000);
        for (i, c) in got.chunks(1000).enumerate() {
            assert!(c.iter().all(|&b| b == t.wrapping_add(i as u8)));
        }
    }
    let fs = Arc::try_unwrap(fs).ok().unwrap();
    let dev = device_of(fs, true);
    assert_clean(&dev);
}

/// A logical-information record naming an inode outside the table is no
/// protocol's leftover: mount refuses the pool, fsck names the block.
#[test]
fn corrupt_records_are_refused() {
    let fs = mount(fresh_device(POOL), "");
    fs.write("/f", &[1u8; 4096]).unwrap();
    let dev = device_of(fs, false);
    let mut raw = [0u8; 256];
    dev.read(0, &mut raw);
    let sb = Superblock::decode(&raw).unwrap();
    let r = SplitRegions::from_descriptors(&sb.regions, sb.feature_incompat);
    let b = sb.layout.total_blocks - 1;
    let bad = LogicalInfo {
        seq: 1,
        ino: 1 << 40,
        generation: 1,
        file_block: 0,
        link: 0,
        own: None,
    };
    dev.write(r.li_offset(b), &bad.encode());
    let rep = check(&dev, &CheckOptions::default()).unwrap();
    assert!(!rep.is_clean(), "{rep}");
    assert!(rep.to_string().contains(&format!("block {b}")), "{rep}");
    let e = mount_error(dev, MountOptions::parse("policy=hunter").unwrap());
    assert!(matches!(e, FsError::Corrupted(_)), "{e}");
}

/// On a cleanly unmounted pool every queue was persisted, so a stale
/// record (here: one naming a file that was deleted) is an error fsck
/// repairs by clearing it; after a crash the same record is a note that
/// mount clears.
#[test]
fn fsck_clears_stale_records_of_a_clean_pool() {
    let fs = mount(fresh_device(POOL), "");
    fs.write("/gone", &[3u8; 8192]).unwrap();
    fs.core().sync_all().unwrap();
    let ino = fs.metadata("/gone").unwrap().attr().ino;
    fs.remove_file("/gone").unwrap();
    let dev = device_of(fs, true);
    let mut raw = [0u8; 256];
    dev.read(0, &mut raw);
    let sb = Superblock::decode(&raw).unwrap();
    let r = SplitRegions::from_descriptors(&sb.regions, sb.feature_incompat);
    let b = sb.layout.total_blocks - 2;
    let stale = LogicalInfo {
        seq: 1,
        ino,
        generation: 1,
        file_block: 0,
        link: 0,
        own: None,
    };
    dev.write(r.li_offset(b), &stale.encode());
    let rep = check(&dev, &CheckOptions::default()).unwrap();
    assert!(!rep.is_clean(), "{rep}");
    assert!(rep.to_string().contains("stale"), "{rep}");
    let fixed = check(&dev, &CheckOptions { repair: true }).unwrap();
    assert_eq!(fixed.exit_code(), 1, "{fixed}");
    assert_clean(&dev);
}

/// utimens may set mtime back in time: the new entry it writes with the
/// inode wins over the write's, across a clean remount and a crash.
#[test]
fn utimens_back_in_time_survives_remounts() {
    use amber_format::Timespec;
    let fs = mount(fresh_device(POOL), "");
    fs.write("/f", &[1u8; 5000]).unwrap();
    let old = Timespec {
        secs: 1_000_000_000,
        nsecs: 5,
    };
    fs.set_times("/f", old, old).unwrap();
    let mtime = |fs: &Fs<MmapDevice>| fs.metadata("/f").unwrap().attr().mtime;
    assert_eq!(mtime(&fs), old);
    let fs = mount(device_of(fs, true), "");
    assert_eq!(mtime(&fs), old, "after a clean remount");
    let older = Timespec { secs: 5, nsecs: 0 };
    fs.set_times("/f", older, older).unwrap();
    let fs = mount(device_of(fs, false), "");
    assert_eq!(mtime(&fs), older, "after a crash");
    assert_eq!(fs.read("/f").unwrap(), vec![1u8; 5000]);
}

/// Appends inside the last block go in place; a shrink leaves the block's
/// tail as it was. Whatever lies past the size — a shrunk tail, an append
/// a crash cut off — reads as zeros once the file grows over it, by
/// truncate or by a write further on.
#[test]
fn bytes_past_the_end_never_show() {
    let fs = mount(fresh_device(POOL), "");
    let f = rw(&fs, "/f");
    f.write_at(&[1u8; 100], 0).unwrap();
    f.write_at(&[2u8; 100], 100).unwrap();
    assert_eq!(stat(&fs, "in_place_appends"), 1);
    f.set_len(50).unwrap();
    f.set_len(300).unwrap();
    let mut want = vec![1u8; 50];
    want.resize(300, 0);
    assert_eq!(fs.read("/f").unwrap(), want, "grown by truncate");
    f.set_len(60).unwrap();
    f.write_at(&[3u8; 10], 8192).unwrap();
    let mut want = vec![1u8; 50];
    want.resize(8192, 0);
    want.extend([3u8; 10]);
    assert_eq!(fs.read("/f").unwrap(), want, "grown by a later write");
    // A crash after an in-place append that no entry covers.
    f.sync_all().unwrap();
    f.write_at(&[4u8; 40], 8202).unwrap();
    drop(f);
    let fs = mount(device_of(fs, false), "");
    assert_eq!(fs.read("/f").unwrap(), want, "the append is gone");
    let f = rw(&fs, "/f");
    f.write_at(&[5u8; 1], 8300).unwrap();
    want.resize(8300, 0);
    want.push(5);
    assert_eq!(fs.read("/f").unwrap(), want, "its bytes read as zeros");
}

/// A file appended to in turns by two threads (a FUSE daemon's workers
/// serving one writer) lies in a few runs, not one per write: each write
/// takes its blocks from the data log that goes on from the file's
/// previous block, whichever thread's log that is. The file reads back
/// whole, and a map lease names its runs.
#[test]
fn appends_in_turns_from_two_threads_stay_contiguous() {
    let fs = Arc::new(mount(fresh_device(POOL), "policy=amber,amber_buffer=never"));
    let f = Arc::new(rw(&fs, "/f"));
    const WRITES: u64 = 512;
    const CHUNK: u64 = 2 * BLOCK_SIZE;
    let turns: Vec<_> = (0..2)
        .map(|_| std::sync::mpsc::sync_channel::<u64>(0))
        .collect();
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let mut txs = Vec::new();
    let workers: Vec<_> = turns
        .into_iter()
        .map(|(tx, rx)| {
            txs.push(tx);
            let (f, done) = (f.clone(), done.clone());
            std::thread::spawn(move || {
                for off in rx {
                    f.write_at(&[(off / CHUNK) as u8; CHUNK as usize], off)
                        .unwrap();
                    done.send(()).unwrap();
                }
            })
        })
        .collect();
    for i in 0..WRITES {
        txs[(i % 2) as usize].send(i * CHUNK).unwrap();
        finished.recv().unwrap();
    }
    drop(txs);
    workers.into_iter().for_each(|w| w.join().unwrap());
    let (id, view) = fs
        .core()
        .map_lease(f.ino(), (0, WRITES * 2), false)
        .unwrap();
    fs.core().end_map_lease(id).unwrap();
    // A run breaks only where a log's 2 MiB run meets a block group's end.
    assert!(
        view.runs.len() <= 4,
        "{} runs for {WRITES} writes",
        view.runs.len()
    );
    let data = fs.read("/f").unwrap();
    assert_eq!(data.len() as u64, WRITES * CHUNK);
    assert!(data
        .chunks(CHUNK as usize)
        .enumerate()
        .all(|(i, c)| c.iter().all(|&x| x == i as u8)));
}

/// amber's whole-block overwrites of a settled file commit themselves
/// (design.md §13.6): fsync then persists nothing, a crash keeps them
/// (the file's head block included, with its time), recovery writes the
/// entry that covers them, and fsck finds the pool clean after it. A
/// write while an append is queued takes the queue's path instead.
#[test]
fn amber_whole_block_overwrites_commit_themselves() {
    let fs = mount(fresh_device(POOL), "policy=amber");
    let f = rw(&fs, "/f");
    f.write_at(&[1; 3 * 4096], 0).unwrap();
    f.sync_all().unwrap();
    let (batches, entries) = (stat(&fs, "batches"), stat(&fs, "entries"));
    f.write_at(&[2; 4096], 4096).unwrap();
    f.sync_all().unwrap();
    f.write_at(&[3; 4096], 2 * 4096).unwrap();
    let mtime = |fs: &Fs<MmapDevice>| fs.metadata("/f").unwrap().attr().mtime;
    let stamped = mtime(&fs);
    assert_eq!(stat(&fs, "own_commits"), 2);
    assert_eq!(
        (stat(&fs, "batches"), stat(&fs, "entries")),
        (batches, entries),
        "nothing persisted for them"
    );
    f.write_at(&[4; 4096], 3 * 4096).unwrap();
    f.write_at(&[5; 4096], 0).unwrap();
    assert_eq!(stat(&fs, "own_commits"), 2, "an append is queued");
    drop(f);
    let dev = device_of(fs, false);
    let rep = check(&dev, &CheckOptions::default()).unwrap();
    assert!(rep.is_clean(), "fsck before recovery: {rep}");
    let (fs, rec) = Fs::mount(dev, MountOptions::parse("policy=amber").unwrap()).unwrap();
    assert!(!rec.was_clean);
    let mut want = vec![1; 4096];
    want.extend([2; 4096]);
    want.extend([3; 4096]);
    assert_eq!(fs.read("/f").unwrap(), want);
    assert_eq!(mtime(&fs), stamped, "the last own commit's time");
    assert_clean(&device_of(fs, true));
}

/// A zone write over an own commit's block persists the file's queue
/// first (design.md §13.6, "The zone"): the write-back of its slice into
/// that block, in place, must find the block's record covered by an
/// entry, not counting on a checksum of bytes the write-back changes.
#[test]
fn a_zone_write_over_an_own_commit_settles_it_first() {
    let fs = mount(fresh_device(POOL), "policy=amber");
    let f = rw(&fs, "/f");
    f.write_at(&[1; 2 * 4096], 0).unwrap();
    f.sync_all().unwrap();
    f.write_at(&[2; 4096], 4096).unwrap();
    f.sync_all().unwrap();
    assert_eq!(stat(&fs, "own_commits"), 1);
    let settles = stat(&fs, "settles");
    f.write_at(&[3; 200], 4096 + 100).unwrap();
    assert_eq!(stat(&fs, "zone_writes"), 1);
    assert_eq!(stat(&fs, "settles"), settles + 1);
    // Written back into the own commit's block, then replaced by blocks
    // whose updates stay queued: the crash keeps the block as written
    // back.
    f.write_at(&[4; 2 * 4096], 0).unwrap();
    drop(f);
    let fs = mount(device_of(fs, false), "policy=amber");
    let mut want = vec![1; 4096];
    want.extend([2; 4096]);
    want[4096 + 100..4096 + 300].fill(3);
    assert_eq!(fs.read("/f").unwrap(), want);
    assert_clean(&device_of(fs, true));
}

/// With the zone capped to nothing, a small overwrite inside one block
/// commits itself too: its block merged with the old one's bytes, one
/// fence, and a crash keeps it; one that straddles two blocks, or the
/// last (partial) block, takes the queue's path.
#[test]
fn amber_small_overwrites_commit_themselves_without_the_zone() {
    let fs = mount(fresh_device(POOL), "policy=amber,amber_zone_max=0");
    let f = rw(&fs, "/f");
    f.write_at(&[1; 3 * 4096 + 100], 0).unwrap();
    f.sync_all().unwrap();
    f.write_at(&[2; 300], 4096 + 50).unwrap();
    f.sync_all().unwrap();
    assert_eq!((stat(&fs, "own_commits"), stat(&fs, "zone_writes")), (1, 0));
    f.write_at(&[3; 10], 3 * 4096 + 20).unwrap();
    assert_eq!(stat(&fs, "own_commits"), 1, "the last block is partial");
    f.sync_all().unwrap();
    f.write_at(&[4; 200], 2 * 4096 - 100).unwrap();
    assert_eq!(stat(&fs, "own_commits"), 1, "two blocks");
    f.sync_all().unwrap();
    f.write_at(&[5; 4000], 8).unwrap();
    assert_eq!(stat(&fs, "own_commits"), 2);
    drop(f);
    let fs = mount(device_of(fs, false), "policy=amber");
    let mut want = vec![1; 3 * 4096 + 100];
    want[4096 + 50..4096 + 350].fill(2);
    want[3 * 4096 + 20..3 * 4096 + 30].fill(3);
    want[2 * 4096 - 100..2 * 4096 + 100].fill(4);
    want[8..4008].fill(5);
    assert_eq!(fs.read("/f").unwrap(), want);
    assert_clean(&device_of(fs, true));
}

/// Writes over and into a file leave its records' links stale; unmount
/// rewrites them before it marks the pool clean (design.md §12.5). A
/// crash at any fence of that unmount leaves a pool whose recovery keeps
/// every file as fsync'd and checks clean; the unmount itself leaves a
/// clean pool whose mount walks the chains.
#[test]
fn an_unmount_rewriting_stale_links_is_crash_safe() {
    let seed = seed("AMBER_TEST_SEED", 0x11a2, "stale links");
    let dev = RecordingDevice::new(POOL);
    Fs::format(&dev, &FormatParams::for_size(POOL)).unwrap();
    let (fs, _) = Fs::mount(dev, MountOptions::parse(SEALED).unwrap()).unwrap();
    let model = stale_files(&fs, &mut SplitMix64::new(seed));
    let rec = Arc::clone(fs.core().device());
    let points: Arc<Mutex<Vec<CrashPoint>>> = Arc::default();
    let sink = Arc::clone(&points);
    rec.set_fence_hook(Some(Box::new(move |p: &CrashPoint| {
        sink.lock().unwrap().push(p.clone())
    })));
    rec.arm_fence_hook(true);
    fs.unmount().unwrap();
    rec.arm_fence_hook(false);
    let points = std::mem::take(&mut *points.lock().unwrap());
    assert!(!points.is_empty());
    let (mut images, mut clean) = (0, 0);
    for p in &points {
        for image in enumerate(p, &EnumConfig::default()).images {
            clean += u32::from(sealed_or_recovered(
                OverlayDevice::from_crash(p, &image),
                &model,
            ));
            images += 1;
        }
    }
    // Some images crashed before the pool was marked clean, and some
    // after (the superblock's store at the last fence).
    assert!(
        clean > 0 && clean < images,
        "{clean} of {images} images clean"
    );
    assert!(sealed_or_recovered(
        OverlayDevice::new(rec.durable_shared()),
        &model
    ));
}

const SEALED: &str = "policy=hunter,hunter_interval=never";

/// Two files whose links writes left stale, everything fsync'd: a file
/// overwritten block by block at random, and one with holes filled and
/// a range punched. Returns their contents.
fn stale_files<D: PmDevice>(fs: &Fs<D>, rng: &mut SplitMix64) -> Vec<(&'static str, Vec<u8>)> {
    let mut model = Vec::new();
    for (path, blocks) in [("/f", 48usize), ("/g", 24)] {
        let f = fs.create(path).unwrap();
        let mut data = vec![0u8; blocks * BLOCK_SIZE as usize];
        rng.fill(&mut data);
        // Every other block first, then the holes between: each fill
        // lands below a block.
        for pass in 0..2 {
            for b in (pass..blocks).step_by(2) {
                let at = b * BLOCK_SIZE as usize;
                f.write_at(&data[at..at + BLOCK_SIZE as usize], at as u64)
                    .unwrap();
            }
        }
        for _ in 0..16 {
            let b = rng.below(blocks as u64) as usize * BLOCK_SIZE as usize;
            rng.fill(&mut data[b..b + BLOCK_SIZE as usize]);
            f.write_at(&data[b..b + BLOCK_SIZE as usize], b as u64)
                .unwrap();
        }
        if path == "/g" {
            let c = fs.core();
            c.fallocate(
                f.ino(),
                4 * BLOCK_SIZE,
                3 * BLOCK_SIZE,
                FallocMode::PunchHole,
            )
            .unwrap();
            data[4 * BLOCK_SIZE as usize..7 * BLOCK_SIZE as usize].fill(0);
        }
        f.sync_all().unwrap();
        let report = fs.core().getxattr(f.ino(), b"user.amberfs.policy").unwrap();
        assert!(String::from_utf8(report).unwrap().contains("chain=stale"));
        model.push((path, data));
    }
    model
}

/// Mounts `dev` (a clean mount walks the chains; any other recovers),
/// reads every file back, unmounts and checks the pool clean. Returns
/// whether the mount found the pool clean.
fn sealed_or_recovered(dev: OverlayDevice, model: &[(&str, Vec<u8>)]) -> bool {
    let (fs, rep) = Fs::mount(dev, MountOptions::parse(SEALED).unwrap()).unwrap();
    for (path, data) in model {
        let clean = rep.was_clean;
        assert!(fs.read(path).unwrap() == *data, "{path} (clean: {clean})");
    }
    let dev = Arc::clone(fs.core().device());
    fs.unmount().unwrap();
    let r = check(&*dev, &CheckOptions { repair: false }).unwrap();
    assert!(r.is_clean(), "{r}");
    rep.was_clean
}
