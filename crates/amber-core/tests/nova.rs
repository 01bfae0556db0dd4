//! The nova policy on a DRAM device: writes, truncates, holes and times
//! against a byte model across remounts (every remount replays the logs),
//! garbage collection keeping a rewritten file's log bounded, fsck judging
//! and repairing damaged logs, a full pool, and layouts refused.

use amber_core::check::{check, CheckOptions};
use amber_core::data::FallocMode;
use amber_core::{Fs, FsError, MountOptions};
use amber_format::nova::{ENTRY_SIZE, OFF_LOG_HEAD};
use amber_format::{FormatParams, PoolLayout, Timespec, BLOCK_SIZE};
use amber_pmem::{MapOptions, MmapDevice, PmDevice};
use amber_sim::SplitMix64;

mod common;
use common::{assert_clean, device_of, errors, rw, seed, stat};

const POOL: u64 = 32 << 20;

fn fresh(size: u64) -> MmapDevice {
    let dev = MmapDevice::anonymous(size, &MapOptions::default()).unwrap();
    let params = FormatParams {
        layout: PoolLayout::Nova,
        ..FormatParams::for_size(size)
    };
    Fs::format(&dev, &params).unwrap();
    dev
}

fn mount(dev: MmapDevice) -> Fs<MmapDevice> {
    Fs::mount(dev, MountOptions::parse("policy=nova").unwrap())
        .unwrap()
        .0
}

/// Remounts: cleanly, or after a crash (the device dropped as is).
fn remount(fs: Fs<MmapDevice>, clean: bool) -> Fs<MmapDevice> {
    let dev = device_of(fs, clean);
    assert_clean(&dev);
    mount(dev)
}

fn contents(fs: &Fs<MmapDevice>, p: &str) -> Vec<u8> {
    fs.read(p).unwrap()
}

/// Seeded writes of every size and alignment, holes, truncates, punches
/// and preallocation against a model; remounts (clean and crashed) replay
/// every log, and fsck finds each pool clean.
#[test]
fn writes_match_a_model_across_remounts() {
    let seed = seed("AMBER_NOVA_SEED", 18, "nova model");
    let mut rng = SplitMix64::new(seed);
    let mut fs = mount(fresh(POOL));
    let mut model: Vec<u8> = Vec::new();
    for step in 0..800 {
        let f = rw(&fs, "/f");
        match rng.below(24) {
            0 => {
                let size = rng.below(300_000) as usize;
                f.set_len(size as u64).unwrap();
                model.resize(size, 0);
            }
            1 => {
                let off = rng.below(250_000);
                let len = 1 + rng.below(40_000);
                fs.core()
                    .fallocate(f.ino(), off, len, FallocMode::PunchHole)
                    .unwrap();
                let end = ((off + len) as usize).min(model.len());
                if (off as usize) < end {
                    model[off as usize..end].fill(0);
                }
            }
            2 => {
                let off = rng.below(250_000);
                let len = 1 + rng.below(40_000);
                let keep_size = rng.below(2) == 0;
                let mode = FallocMode::Allocate { keep_size };
                fs.core().fallocate(f.ino(), off, len, mode).unwrap();
                if !keep_size && (off + len) as usize > model.len() {
                    model.resize((off + len) as usize, 0);
                }
            }
            3 if step % 7 == 0 => {
                drop(f);
                fs = remount(fs, rng.below(2) == 0);
                assert_eq!(contents(&fs, "/f"), model, "after remount at step {step}");
                continue;
            }
            _ => {
                let off = rng.below(260_000) as usize;
                let max = if rng.below(4) == 0 { 20_000 } else { 300 };
                let len = 1 + rng.below(max) as usize;
                let data: Vec<u8> = (0..len).map(|_| rng.below(255) as u8 + 1).collect();
                f.write_at(&data, off as u64).unwrap();
                if model.len() < off + len {
                    model.resize(off + len, 0);
                }
                model[off..off + len].copy_from_slice(&data);
            }
        }
        assert_eq!(
            f.metadata().unwrap().len(),
            model.len() as u64,
            "step {step}"
        );
    }
    assert_eq!(contents(&fs, "/f"), model);
    let fs = remount(fs, false);
    assert_eq!(contents(&fs, "/f"), model);
}

/// A small file overwritten many times keeps a log of a few pages: fast
/// GC unlinks pages whose entries are all superseded and thorough GC
/// rewrites a log under half live; after a remount it reads the same.
#[test]
fn garbage_collection_bounds_a_rewritten_files_log() {
    let fs = mount(fresh(POOL));
    let f = rw(&fs, "/f");
    let mut model = vec![0u8; 64 * 1024];
    for i in 0..20_000u64 {
        let off = (i * 4099) % (60 * 1024);
        let byte = (i % 251) as u8 + 1;
        f.write_at(&[byte; 100], off).unwrap();
        model[off as usize..off as usize + 100].fill(byte);
    }
    assert!(stat(&fs, "fast_gc_pages") > 0, "fast GC never ran");
    let pages =
        stat(&fs, "log_pages") - stat(&fs, "fast_gc_pages") - stat(&fs, "thorough_gc_pages");
    assert!(pages <= 8, "{pages} log pages for a 16-page file");
    let sectors = fs.metadata("/f").unwrap().attr().blocks;
    assert!(sectors * 512 <= (16 + 8) * BLOCK_SIZE, "{sectors} sectors");
    drop(f);
    let fs = remount(fs, false);
    model.truncate(60 * 1024 + 100 - 1 + 1);
    let got = contents(&fs, "/f");
    assert_eq!(got, model[..got.len()]);
}

/// A log with a few live entries among many dead ones (a truncate pins
/// its entry) is rewritten by thorough GC.
#[test]
fn thorough_gc_rewrites_a_mostly_dead_log() {
    let fs = mount(fresh(POOL));
    let f = rw(&fs, "/f");
    for round in 0..200u64 {
        f.write_at(&[round as u8; 5000], 0).unwrap();
        f.set_len(4000).unwrap();
    }
    assert!(stat(&fs, "thorough_gcs") > 0, "thorough GC never ran");
    drop(f);
    let fs = remount(fs, false);
    assert_eq!(contents(&fs, "/f"), vec![199u8; 4000]);
}

/// Times and sizes live in the log: utimens, a truncate and a
/// preallocation past the size survive a crash.
#[test]
fn attributes_survive_a_crash() {
    let fs = mount(fresh(POOL));
    let f = rw(&fs, "/f");
    f.write_at(b"hello", 0).unwrap();
    let past = Timespec {
        secs: 1_000_000,
        nsecs: 7,
    };
    fs.set_times("/f", past, past).unwrap();
    fs.core()
        .fallocate(
            f.ino(),
            0,
            100_000,
            FallocMode::Allocate { keep_size: true },
        )
        .unwrap();
    drop(f);
    let fs = remount(fs, false);
    let m = fs.metadata("/f").unwrap();
    assert_eq!(m.len(), 5);
    assert_eq!(m.attr().mtime, past);
    assert!(m.attr().blocks * 512 >= 100_000, "preallocation kept");
    assert_eq!(contents(&fs, "/f"), b"hello");
}

/// Deleting files gives their log pages and data back.
#[test]
fn deleted_files_free_their_logs() {
    let fs = mount(fresh(POOL));
    let files: Vec<_> = (0..20).map(|i| rw(&fs, &format!("/f{i}"))).collect();
    // Empty files own nothing; the directory's block stays after.
    let free = fs.statfs().blocks_free;
    for f in files {
        for j in 0..100u64 {
            f.write_at(&[1; 3000], j * 3000).unwrap();
        }
    }
    for i in 0..20 {
        fs.remove_file(&format!("/f{i}")).unwrap();
    }
    assert_eq!(fs.statfs().blocks_free, free);
    let fs = remount(fs, true);
    assert_eq!(fs.statfs().blocks_free, free);
}

/// A full pool refuses a write with ENOSPC and loses nothing: what was
/// written reads back, fsck is clean, and space freed is usable again.
#[test]
fn a_full_pool_refuses_cleanly() {
    let fs = mount(fresh(8 << 20));
    let f = rw(&fs, "/big");
    let chunk = vec![9u8; 64 * 1024];
    let mut written = 0u64;
    loop {
        match f.write_at(&chunk, written) {
            Ok(_) => written += chunk.len() as u64,
            Err(FsError::NoSpace) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(written > 0);
    assert_eq!(f.metadata().unwrap().len(), written);
    f.set_len(written / 2).unwrap();
    f.write_at(&chunk, 0).unwrap();
    drop(f);
    let fs = remount(fs, false);
    assert_eq!(fs.metadata("/big").unwrap().len(), written / 2);
}

/// A damaged entry inside a committed log: mount refuses the file, fsck
/// names it, and repair ends the log before it, keeping the prefix.
#[test]
fn fsck_repairs_a_damaged_log() {
    let fs = mount(fresh(POOL));
    let f = rw(&fs, "/f");
    for i in 0..10u64 {
        f.write_at(&[i as u8 + 1; 4096], i * 4096).unwrap();
    }
    let ino = f.ino();
    drop(f);
    let dev = device_of(fs, true);
    let l = amber_core::fs::read_superblock(&dev).unwrap().layout;
    let head = dev.load_u64(l.inode_offset(ino) + OFF_LOG_HEAD as u64);
    // The sixth entry (slot 5) of the first page: flip one byte.
    let at = l.block_offset(head) + 5 * ENTRY_SIZE + 20;
    let mut b = [0u8; 1];
    dev.read(at, &mut b);
    dev.write(at, &[b[0] ^ 0xff]);
    let rep = check(&dev, &CheckOptions::default()).unwrap();
    assert!(
        errors(&rep).iter().any(|e| e.contains("log")),
        "fsck: {rep}"
    );
    let rep = check(&dev, &CheckOptions { repair: true }).unwrap();
    assert!(!rep.is_clean() && errors(&rep).is_empty(), "{rep}");
    assert_clean(&dev);
    let fs = mount(dev);
    let got = contents(&fs, "/f");
    assert_eq!(got.len(), 5 * 4096, "the five entries before the damage");
    assert!(got
        .chunks(4096)
        .enumerate()
        .all(|(i, c)| c == vec![i as u8 + 1; 4096]));
}

/// nova mounts only a nova pool, and a nova pool takes only nova.
#[test]
fn layouts_are_refused_both_ways() {
    let err = Fs::mount(fresh(POOL), MountOptions::parse("policy=direct").unwrap()).err();
    let msg = err.expect("direct on a nova pool").to_string();
    assert!(msg.contains("policy=nova"), "{msg}");
    let dev = MmapDevice::anonymous(POOL, &MapOptions::default()).unwrap();
    Fs::format(&dev, &common::classic_params(POOL)).unwrap();
    let err = Fs::mount(dev, MountOptions::parse("policy=nova").unwrap()).err();
    let msg = err.expect("nova on a classic pool").to_string();
    assert!(msg.contains("--layout nova"), "{msg}");
}

/// The sequence of amber-crash's `log-gc` workload (whose crash images
/// cover both collections at every fence) runs fast GC and then thorough
/// GC: without this the crash suite would not reach them.
#[test]
fn the_log_gc_crash_workload_reaches_both_collections() {
    let fs = mount(fresh(POOL));
    let f = rw(&fs, "/g");
    f.write_at(&[1; 4096], 0).unwrap();
    for i in 0..70u64 {
        f.write_at(&[i as u8; 64], (i % 4) * 64).unwrap();
    }
    assert!(stat(&fs, "fast_gc_pages") > 0);
    for i in 0..64u64 {
        f.write_at(&[i as u8; 64], 100).unwrap();
        f.set_len(6000 - i).unwrap();
    }
    assert!(stat(&fs, "thorough_gcs") > 0);
}
