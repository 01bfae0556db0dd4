//! The lawn policy on a DRAM device: alternate writing against a byte
//! model for every slot size, what survives a crash and a remount, growth
//! and write-back when the zone fills, the operations that must write
//! slices back first (append, truncate, punch), folding the zone back when
//! another policy mounts, and corrupt descriptors refused.

use amber_core::check::{check, CheckOptions};
use amber_core::data::FallocMode;
use amber_core::{Fs, FsError, MountOptions, OpenOptions};
use amber_format::zone::FEATURE_ZONE;
use amber_pmem::{MapOptions, MmapDevice, PmDevice};
use amber_sim::SplitMix64;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;
use common::{assert_clean, classic_params, device_of, stat};

const POOL: u64 = 32 << 20;

fn fresh_device() -> MmapDevice {
    let dev = MmapDevice::anonymous(POOL, &MapOptions::default()).unwrap();
    Fs::format(&dev, &classic_params(POOL)).unwrap();
    dev
}

/// Mounts with `opts`; under lawn the idle-time write-back is held off
/// (unless `opts` sets it), since these tests count where slices go and a
/// slow run would otherwise look idle.
fn mount(dev: MmapDevice, opts: &str) -> Fs<MmapDevice> {
    let hold = if opts.contains("policy=lawn") && !opts.contains("lawn_idle=") {
        ",lawn_idle=3600s"
    } else {
        ""
    };
    let o = MountOptions::parse(&format!("{opts}{hold}")).unwrap();
    Fs::mount(dev, o).unwrap().0
}

fn read_all(fs: &Fs<MmapDevice>, p: &str) -> Vec<u8> {
    fs.read(p).unwrap()
}

/// Seeded random overwrites of 1 B to 9 KiB (mostly small) over a
/// preallocated file, with occasional appends, compared with a model
/// after every few writes; then a crash and a clean remount must show the
/// same bytes and leave fsck clean.
#[test]
fn random_overwrites_match_a_model_for_every_slot_size() {
    let seed = common::seed("AMBER_LAWN_SEED", 7, "lawn model");
    for slot in [64, 128, 256, 512] {
        let opts = format!("policy=lawn,lawn_slot={slot}");
        let fs = mount(fresh_device(), &opts);
        let size = 64 * 1024;
        let mut model = vec![0u8; size];
        let mut rng = SplitMix64::new(seed ^ slot);
        for (i, b) in model.iter_mut().enumerate() {
            *b = (i * 31 % 251) as u8;
        }
        fs.write("/f", &model).unwrap();
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fs, "/f")
            .unwrap();
        for step in 0..400 {
            let len = match rng.below(10) {
                0 => 1 + rng.below(9000) as usize,
                1..=3 => 1 + rng.below(64) as usize,
                _ => 1 + rng.below(700) as usize,
            };
            let append = rng.below(40) == 0;
            let off = if append {
                model.len()
            } else {
                rng.below((model.len() - 1) as u64) as usize
            };
            let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            f.write_at(&data, off as u64).unwrap();
            if model.len() < off + len {
                model.resize(off + len, 0);
            }
            model[off..off + len].copy_from_slice(&data);
            if step % 50 == 0 {
                assert_eq!(read_all(&fs, "/f"), model, "slot {slot} step {step}");
            }
        }
        assert_eq!(read_all(&fs, "/f"), model, "slot {slot}");
        assert!(stat(&fs, "to_zone") > 0 && stat(&fs, "to_file") > 0);
        assert!(stat(&fs, "multi_slice_writes") > 0);
        drop(f);
        let dev = device_of(fs, false);
        let fs = mount(dev, &opts);
        assert_eq!(read_all(&fs, "/f"), model, "slot {slot} after a crash");
        // The recovered slots keep alternating with the file.
        let f = OpenOptions::new().write(true).open(&fs, "/f").unwrap();
        for _ in 0..200 {
            let len = 1 + rng.below(300) as usize;
            let off = rng.below((model.len() - len) as u64) as usize;
            let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            f.write_at(&data, off as u64).unwrap();
            model[off..off + len].copy_from_slice(&data);
        }
        assert!(stat(&fs, "to_file") > 0, "no recovered slice went back");
        drop(f);
        assert_eq!(read_all(&fs, "/f"), model, "slot {slot} after a crash");
        let dev = device_of(fs, true);
        assert_clean(&dev);
        let fs = mount(dev, &opts);
        assert_eq!(read_all(&fs, "/f"), model, "slot {slot} after unmount");
    }
}

/// Algorithm 1: a slice alternates between a slot and the file.
#[test]
fn one_slice_alternates_between_zone_and_file() {
    let fs = mount(fresh_device(), "policy=lawn");
    fs.write("/f", &[0u8; 8192]).unwrap();
    let f = OpenOptions::new().write(true).open(&fs, "/f").unwrap();
    f.write_at(&[1; 64], 128).unwrap();
    assert_eq!((stat(&fs, "to_zone"), stat(&fs, "to_file")), (1, 0));
    f.write_at(&[2; 64], 128).unwrap();
    assert_eq!((stat(&fs, "to_zone"), stat(&fs, "to_file")), (1, 1));
    f.write_at(&[3; 10], 130).unwrap();
    assert_eq!((stat(&fs, "to_zone"), stat(&fs, "to_file")), (2, 1));
    assert_eq!(stat(&fs, "multi_slice_writes"), 0);
    let data = read_all(&fs, "/f");
    assert_eq!(&data[128..130], &[2, 2]);
    assert_eq!(&data[130..140], &[3; 10]);
    assert_eq!(&data[140..192], &[2; 52]);
    // Two slices: one commit-number store.
    f.write_at(&[4; 128], 1024).unwrap();
    assert_eq!(stat(&fs, "multi_slice_writes"), 1);
    // A whole block by copy-on-write, with slices at head and tail.
    f.write_at(&[5; 4096 + 200], 4000).unwrap();
    assert_eq!(stat(&fs, "cow_writes"), 1);
    let data = read_all(&fs, "/f");
    assert_eq!(&data[4000..8192], &[5u8; 4192][..]);
}

/// A sub-zone whose free slots fall under the threshold grows; one that
/// may not grow writes back its least recently written slices. The data
/// stays right throughout.
#[test]
fn a_full_zone_grows_or_writes_back() {
    for (grow, opts) in [
        (
            true,
            "policy=lawn,lawn_zone=1,lawn_subzones=1,lawn_idle=3600s",
        ),
        (
            false,
            "policy=lawn,lawn_zone=1,lawn_subzones=1,lawn_idle=3600s,lawn_grow=0",
        ),
    ] {
        let fs = mount(fresh_device(), opts);
        let (slots, _) = fs.core().zone().unwrap().occupancy();
        // Every other 64-byte slice once: twice as many slices as slots.
        let n = 2 * slots as usize;
        let mut model = vec![9u8; n * 128];
        fs.write("/f", &model).unwrap();
        let f = OpenOptions::new().write(true).open(&fs, "/f").unwrap();
        for i in 0..n {
            let off = i * 128;
            let v = [(i % 251) as u8; 64];
            f.write_at(&v, off as u64).unwrap();
            model[off..off + 64].copy_from_slice(&v);
        }
        assert_eq!(stat(&fs, "zone_growths") > 0, grow, "{opts}");
        assert_eq!(stat(&fs, "evicted") > 0, !grow, "{opts}");
        assert_eq!(read_all(&fs, "/f"), model);
        assert!(fs.core().write_back(u64::MAX).unwrap() > 0);
        assert_eq!(fs.core().zone().unwrap().occupancy().1, 0);
        assert_eq!(read_all(&fs, "/f"), model);
        drop(f);
        assert_clean(&device_of(fs, true));
    }
}

/// When nothing is written for `lawn_idle`, the background thread writes
/// every slice back: the zone empties and the file reads the same.
#[test]
fn idle_time_write_back_empties_the_zone() {
    let fs = mount(fresh_device(), "policy=lawn,lawn_idle=20ms");
    let mut model = vec![3u8; 64 * 1024];
    fs.write("/f", &model).unwrap();
    let f = OpenOptions::new().write(true).open(&fs, "/f").unwrap();
    for i in 0..300usize {
        let off = i * 200;
        f.write_at(&[i as u8; 100], off as u64).unwrap();
        model[off..off + 100].fill(i as u8);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while fs.core().zone().unwrap().occupancy().1 > 0 {
        assert!(Instant::now() < deadline, "the zone never emptied");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(stat(&fs, "idle_written_back") > 0);
    assert_eq!(read_all(&fs, "/f"), model);
    drop(f);
    assert_clean(&device_of(fs, true));
}

/// Appends, truncates and punched holes write the affected slices back
/// first: no slot may hide bytes the file's new shape exposes.
#[test]
fn size_changes_and_holes_see_through_the_zone() {
    let fs = mount(fresh_device(), "policy=lawn");
    let mut model = vec![1u8; 10_000];
    fs.write("/f", &model).unwrap();
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fs, "/f")
        .unwrap();
    let put = |m: &mut Vec<u8>, off: usize, data: &[u8]| {
        f.write_at(data, off as u64).unwrap();
        if m.len() < off + data.len() {
            m.resize(off + data.len(), 0);
        }
        m[off..off + data.len()].copy_from_slice(data);
    };
    // A slice holding the end, then an append past it.
    put(&mut model, 9990, &[2; 10]);
    put(&mut model, 10_000, &[3; 50]);
    assert_eq!(read_all(&fs, "/f"), model);
    // Shrink into a slice in the zone, grow again: zeros past the cut.
    put(&mut model, 5000, &[4; 100]);
    f.set_len(5030).unwrap();
    f.set_len(9000).unwrap();
    model.truncate(5030);
    model.resize(9000, 0);
    assert_eq!(read_all(&fs, "/f"), model);
    // A write straddling the end.
    put(&mut model, 8990, &[5; 40]);
    put(&mut model, 8995, &[6; 100]);
    assert_eq!(read_all(&fs, "/f"), model);
    // Punch a hole over slices in the zone.
    put(&mut model, 100, &[7; 300]);
    fs.core()
        .fallocate(f.ino(), 0, 4096, FallocMode::PunchHole)
        .unwrap();
    model[..4096].fill(0);
    assert_eq!(read_all(&fs, "/f"), model);
    drop(f);
    assert_clean(&device_of(fs, true));
}

/// A pool mounted with another policy folds the zone back into the files
/// and removes it; a changed slot size does the same before a new zone.
#[test]
fn other_policies_fold_the_zone_back() {
    let fs = mount(fresh_device(), "policy=lawn");
    let free_before = fs.statfs().blocks_free;
    let mut model = vec![0u8; 50_000];
    fs.write("/f", &model).unwrap();
    let f = OpenOptions::new().write(true).open(&fs, "/f").unwrap();
    for i in 0..200u64 {
        let off = (i * 211) as usize;
        f.write_at(&[i as u8; 70], off as u64).unwrap();
        model[off..off + 70].fill(i as u8);
    }
    drop(f);
    assert!(fs.core().zone().unwrap().occupancy().1 > 0);
    // A crash, then a mount with another slot size, then with direct.
    let dev = device_of(fs, false);
    let fs = mount(dev, "policy=lawn,lawn_slot=256");
    assert_eq!(read_all(&fs, "/f"), model);
    assert_eq!(fs.core().zone().unwrap().geo.slot_size, 256);
    let dev = device_of(fs, true);
    let fs = mount(dev, "policy=direct");
    assert!(fs.core().zone().is_none());
    assert_eq!(read_all(&fs, "/f"), model);
    let sb = amber_core::fs::read_superblock(&**fs.core().device()).unwrap();
    assert_eq!(sb.feature_incompat & FEATURE_ZONE, 0);
    // The zone's blocks are free again (only the file's are in use).
    assert!(fs.statfs().blocks_free > free_before);
    assert_clean(&device_of(fs, true));
}

/// Unlinking a file clears its descriptors before the inode can be
/// reused; many threads writing many files keep their own bytes.
#[test]
fn unlink_and_concurrent_writers() {
    let fs = Arc::new(mount(fresh_device(), "policy=lawn,lawn_subzones=2"));
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            let fs = Arc::clone(&fs);
            std::thread::spawn(move || {
                let p = format!("/t{t}");
                let mut model = vec![t; 20_000];
                fs.write(&p, &model).unwrap();
                let f = OpenOptions::new().write(true).open(&fs, &p).unwrap();
                let mut rng = SplitMix64::new(t as u64);
                for _ in 0..500 {
                    let off = rng.below(19_000) as usize;
                    let len = 1 + rng.below(300) as usize;
                    let v = vec![rng.next_u64() as u8; len];
                    f.write_at(&v, off as u64).unwrap();
                    model[off..off + len].copy_from_slice(&v);
                }
                assert_eq!(fs.read(&p).unwrap(), model, "thread {t}");
            })
        })
        .collect();
    threads.into_iter().for_each(|h| h.join().unwrap());
    fs.remove_file("/t1").unwrap();
    fs.write("/new", &[8u8; 5000]).unwrap();
    assert_eq!(fs.read("/new").unwrap(), vec![8u8; 5000]);
    let fs = Arc::try_unwrap(fs).ok().expect("the only handle");
    assert_clean(&device_of(fs, true));
}

/// A pool too small for the zone asked for is refused with a message
/// naming the options to change.
#[test]
fn a_pool_without_room_for_the_zone_says_so() {
    let size = 1 << 20;
    let dev = MmapDevice::anonymous(size, &MapOptions::default()).unwrap();
    Fs::format(&dev, &classic_params(size)).unwrap();
    let o = MountOptions::parse("policy=lawn,lawn_subzones=16").unwrap();
    let e = Fs::mount(dev, o).err().expect("no room");
    assert!(e.to_string().contains("lawn_subzones"), "{e}");
}

/// A committed descriptor outside its file is corruption: mount refuses,
/// fsck reports it.
#[test]
fn corrupt_descriptors_are_refused() {
    let fs = mount(fresh_device(), "policy=lawn,lawn_subzones=1");
    fs.write("/f", &[0u8; 8192]).unwrap();
    let ino = fs.open("/f").unwrap().ino();
    let zone = fs.core().zone().unwrap();
    let geo = zone.geo;
    let chunk = zone.lock(0).chunks()[0];
    let dev = device_of(fs, true);
    // Slice 1000 of an 8 KiB file: past its size, committed (seq 0).
    let d = amber_format::zone::Descriptor {
        ino: ino as u32,
        slice: 1000,
        seq: 0,
        doomed: false,
    };
    dev.store_u128(geo.desc_offset(chunk, 5), d.encode());
    let rep = check(&dev, &CheckOptions::default()).unwrap();
    assert!(!rep.is_clean(), "fsck missed it: {rep}");
    let err = Fs::mount(dev, MountOptions::parse("policy=lawn").unwrap()).err();
    assert!(matches!(err, Some(FsError::Corrupted(_))), "{err:?}");
}
