//! Write leases against a mounted core (design.md §17.4-§17.5, §17.10-
//! §17.11): a lessee's own commits and covered writes (appends, writes
//! across blocks and into holes) become the file's when the lease comes
//! back, or after a crash with the lease still out; what the verifier must
//! not trust — a record of another file, a seq outside the grant, a torn
//! block, a torn entry or one past the grant — is dropped; a leased
//! truncate grows with zeros and ends the lease when it shrinks; small
//! overwrites go through the zone's granted slots, read back through the
//! lessee's overlay, and the verifier drops a torn or forged head; fsck
//! stays clean either way.

use std::sync::Arc;
use std::time::Duration;

use amber_core::check::{check, CheckOptions};
use amber_core::data::LeaseEnd::{Abandoned, Returned, Unused};
use amber_core::{Core, Fs, MountOptions, OpenOptions, WriteLease};
use amber_format::split::{AttrEntry, LogicalInfo, OwnCommit, Record, ENTRY_SIZE, LI_SIZE};
use amber_format::{FormatParams, PoolLayout, Timespec, BLOCK_SIZE};
use amber_lease::{NotMine, Writer, Writes, WINDOW_BLOCKS};
use amber_pmem::{MapOptions, MmapDevice, PmDevice};
use amber_sim::SplitMix64;

const POOL: u64 = 64 << 20;
const BS: usize = BLOCK_SIZE as usize;

fn mount(dev: MmapDevice) -> Fs<MmapDevice> {
    let o = MountOptions::parse("policy=amber,hunter_interval=never").unwrap();
    Fs::mount(dev, o).unwrap().0
}

fn fresh() -> Fs<MmapDevice> {
    let dev = MmapDevice::anonymous(POOL, &MapOptions::default()).unwrap();
    let params = FormatParams {
        layout: PoolLayout::Split,
        ..FormatParams::for_size(POOL)
    };
    Fs::format(&dev, &params).unwrap();
    mount(dev)
}

/// The device back from `fs`: unmounted, or dropped as by a crash.
fn device_of(fs: Fs<MmapDevice>, unmount: bool) -> MmapDevice {
    fs.into_device(unmount, Duration::from_secs(10)).unwrap()
}

fn assert_clean(dev: &MmapDevice) {
    let rep = check(dev, &CheckOptions::default()).unwrap();
    assert!(rep.is_clean(), "fsck: {rep}");
}

/// `/f`, `blocks` blocks of seeded bytes, fsync'd; its inode and model.
fn file(fs: &Fs<MmapDevice>, blocks: usize, seed: u64) -> (u64, Vec<u8>) {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .open(fs, "/f")
        .unwrap();
    let mut rng = SplitMix64::new(seed);
    let model: Vec<u8> = (0..blocks * BS).map(|_| rng.next_u64() as u8).collect();
    // Two halves, so the file's blocks are not one run.
    f.write_at(&model[..blocks * BS / 2], 0).unwrap();
    f.sync_all().unwrap();
    f.write_at(&model[blocks * BS / 2..], (blocks * BS / 2) as u64)
        .unwrap();
    f.sync_all().unwrap();
    (
        fs.core().lookup(amber_format::ROOT_INO, b"f").unwrap().ino,
        model,
    )
}

/// `fs` unmounted, checked clean by fsck and mounted again, holding
/// `model` as `ino` (`what` names the case).
fn remounted(fs: Fs<MmapDevice>, ino: u64, model: &[u8], what: &str) -> Fs<MmapDevice> {
    let dev = device_of(fs, true);
    assert_clean(&dev);
    let fs = mount(dev);
    assert_eq!(contents(&fs, ino, model.len()), model, "{what}");
    fs
}

fn contents(fs: &Fs<MmapDevice>, ino: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len + 10];
    let n = fs.core().read(ino, 0, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

/// A write lease of `n` blocks on `ino`'s first window, as a lessee
/// holds it: the core, the grant, the device and the grant's writer.
fn leased(fs: &Fs<MmapDevice>, ino: u64, n: usize) -> Leased {
    leased_as(fs, ino, n, true)
}

/// `leased`, with a writer that uses the grant's zone slots only if
/// `slots`: without them every write is a block's, as the tests of
/// growing writes want (a write across a block with slices would end
/// the lease, `a_lessees_slices_...` below).
fn leased_as(fs: &Fs<MmapDevice>, ino: u64, n: usize, slots: bool) -> Leased {
    let core = Arc::clone(fs.core());
    let lease = core
        .write_lease(ino, (0, WINDOW_BLOCKS), n)
        .unwrap()
        .unwrap();
    let dev = Arc::clone(core.device());
    let window = (0..WINDOW_BLOCKS, lease.view.size);
    let mut writes = Writes::of(&lease);
    if !slots {
        writes.slots = None;
    }
    let w = Writer::new(ino, writes, window, dev.size()).expect("a grant inside the pool");
    (core, lease, dev, w)
}

type Leased = (Arc<Core<MmapDevice>>, WriteLease, Arc<MmapDevice>, Writer);

fn time(s: i64) -> Timespec {
    Timespec {
        secs: 1_700_000_000 + s,
        nsecs: 5,
    }
}

/// A lessee's writes of random shapes on a leased file, applied to the
/// model too; returns how many it made.
fn scribble(
    dev: &MmapDevice,
    w: &mut Writer,
    lease: &WriteLease,
    model: &mut [u8],
    rng: &mut SplitMix64,
    n: usize,
) -> usize {
    let mut made = 0;
    for i in 0..n {
        let fb = rng.next_u64() % (model.len() / BS) as u64;
        let (at, len) = match rng.next_u64() % 3 {
            0 => (0, BS),
            1 => (rng.next_u64() as usize % BS, 1),
            _ => (100, 128),
        };
        let len = len.min(BS - at);
        let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        let off = fb * BLOCK_SIZE + at as u64;
        match w.write(dev, &lease.view.runs, off, &data, time(i as i64)) {
            Ok(r) => {
                r.unwrap();
                let o = off as usize;
                model[o..o + len].copy_from_slice(&data);
                made += 1;
            }
            Err(NotMine::Spent) => break,
            Err(NotMine::Shape) => panic!("an overwrite inside a block was refused"),
        }
    }
    made
}

#[test]
fn a_lessees_writes_are_the_files_once_adopted_and_after_a_remount() {
    let fs = fresh();
    let (ino, mut model) = file(&fs, 24, 1);
    let (core, lease, dev, mut w) = leased(&fs, ino, 40);
    let mut rng = SplitMix64::new(2);
    assert_eq!(scribble(&dev, &mut w, &lease, &mut model, &mut rng, 30), 30);
    // Past the window, and past the largest file, are the kernel's.
    let runs = &lease.view.runs;
    let across = w.write(
        &*dev,
        runs,
        WINDOW_BLOCKS * BLOCK_SIZE - 1,
        &[1, 2],
        time(99),
    );
    assert_eq!(across.unwrap_err(), NotMine::Shape);
    let past = w.write(&*dev, runs, u64::MAX - 1, &[1], time(99));
    assert_eq!(past.unwrap_err(), NotMine::Shape);
    // Heads carry no time: the lessee seals its newest into an entry
    // before it gives the lease back, as the client does.
    w.seal(&*dev).unwrap();
    assert!(core.adopt(ino, &lease.writes, Returned).unwrap() >= 30);
    assert_eq!(contents(&fs, ino, model.len()), model);
    let attr = core.getattr(ino).unwrap();
    assert_eq!((attr.size, attr.mtime), (model.len() as u64, time(29)));
    drop(dev);
    drop(core);
    remounted(fs, ino, &model, "");
}

#[test]
fn a_crash_with_the_lease_out_keeps_every_write_it_made() {
    let fs = fresh();
    let (ino, mut model) = file(&fs, 16, 3);
    let (core, lease, dev, mut w) = leased(&fs, ino, 64);
    let mut rng = SplitMix64::new(4);
    // Until the granted blocks or slots run out.
    assert!(scribble(&dev, &mut w, &lease, &mut model, &mut rng, 10_000) < 10_000);
    drop((dev, core));
    let dev = device_of(fs, false);
    let fs = mount(dev);
    assert_eq!(contents(&fs, ino, model.len()), model);
    let dev = device_of(fs, true);
    assert_clean(&dev);
}

#[test]
fn the_verifier_drops_what_the_lessee_may_not_have_written() {
    let fs = fresh();
    let (ino, mut model) = file(&fs, 8, 5);
    let before = model.clone();
    let (core, lease, dev, mut w) = leased(&fs, ino, 8);
    let mut rng = SplitMix64::new(6);
    assert_eq!(scribble(&dev, &mut w, &lease, &mut model, &mut rng, 2), 2);
    let blocks = &lease.writes.blocks;
    let stray = |b: u64, li: LogicalInfo, data: &[u8]| {
        dev.write(b * BLOCK_SIZE, data);
        dev.write(lease.records + b * LI_SIZE, &li.encode());
    };
    let good = vec![7u8; BS];
    let li = |seq, ino, own: Option<OwnCommit>| LogicalInfo {
        seq,
        ino,
        generation: lease.view.generation,
        file_block: 1,
        link: 0,
        own,
    };
    let own = Some(OwnCommit::new(time(50), &good));
    let seq = lease.writes.seq;
    // Another file's; a seq past the grant; a torn block; not an own commit.
    stray(blocks[2], li(seq + 2, ino + 1, own), &good);
    stray(blocks[3], li(seq + 100, ino, own), &good);
    stray(blocks[4], li(seq + 4, ino, own), &[8u8; BS]);
    stray(blocks[5], li(seq + 5, ino, None), &good);
    // The holder died: each block is checked against its record.
    assert_eq!(core.adopt(ino, &lease.writes, Abandoned).unwrap(), 2);
    assert_eq!(contents(&fs, ino, model.len()), model);
    assert_ne!(model, before);
    drop((dev, core));
    remounted(fs, ino, &model, "");
}

#[test]
fn an_unused_grant_goes_back_whole() {
    let fs = fresh();
    let (ino, model) = file(&fs, 4, 7);
    let core = Arc::clone(fs.core());
    let free = fs.statfs().blocks_free;
    let lease = core
        .write_lease(ino, (0, WINDOW_BLOCKS), 100)
        .unwrap()
        .unwrap();
    assert_eq!(lease.writes.blocks.len(), 100);
    assert_eq!(core.adopt(ino, &lease.writes, Returned).unwrap(), 0);
    assert_eq!(fs.statfs().blocks_free, free);
    assert_eq!(contents(&fs, ino, model.len()), model);
    drop(core);
    assert_clean(&device_of(fs, true));
}

/// A lessee's writes of every shape — overwrites, appends, writes across
/// blocks, into holes and past the end, a partial last block — applied
/// to the model too; returns how many it made.
fn grow(
    dev: &MmapDevice,
    w: &mut Writer,
    lease: &WriteLease,
    model: &mut Vec<u8>,
    rng: &mut SplitMix64,
    n: usize,
) -> usize {
    let mut made = 0;
    for i in 0..n {
        let size = model.len() as u64;
        let (off, len) = match rng.next_u64() % 5 {
            0 => (size, 1 + rng.next_u64() % (3 * BLOCK_SIZE)),
            1 => (
                size + rng.next_u64() % (2 * BLOCK_SIZE),
                1 + rng.next_u64() % 300,
            ),
            2 => (
                rng.next_u64() % size.max(1),
                1 + rng.next_u64() % (2 * BLOCK_SIZE),
            ),
            3 => (rng.next_u64() % size.max(1), 1 + rng.next_u64() % 64),
            _ => (
                (rng.next_u64() % size.div_ceil(BLOCK_SIZE).max(1)) * BLOCK_SIZE,
                BLOCK_SIZE,
            ),
        };
        let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        match w.write(dev, &lease.view.runs, off, &data, time(i as i64)) {
            Ok(r) => {
                r.unwrap();
                let (o, end) = (off as usize, (off + len) as usize);
                if end > model.len() {
                    model.resize(end, 0);
                }
                model[o..end].copy_from_slice(&data);
                made += 1;
            }
            Err(NotMine::Spent) => break,
            Err(NotMine::Shape) => panic!("a write inside the window was refused"),
        }
        assert_eq!(w.size(), model.len() as u64);
    }
    made
}

#[test]
fn writes_that_grow_the_file_are_adopted_whole() {
    for seed in 0..8u64 {
        println!("seed {seed}");
        let fs = fresh();
        let (ino, mut model) = file(&fs, 1 + seed as usize % 5, seed);
        // A partial last block, so growth must zero its tail.
        let cut = model.len() as u64 - 1000;
        let f = OpenOptions::new().write(true).open(&fs, "/f").unwrap();
        f.set_len(cut).unwrap();
        f.sync_all().unwrap();
        drop(f);
        model.truncate(cut as usize);
        let (core, lease, dev, mut w) = leased_as(&fs, ino, 200, false);
        // In place, over a gap the truncate left old bytes in: zeros.
        let gap = model.len() + 100;
        let runs = &lease.view.runs;
        w.write(&*dev, runs, gap as u64, &[9; 50], time(0))
            .unwrap()
            .unwrap();
        model.resize(gap, 0);
        model.extend_from_slice(&[9; 50]);
        let mut rng = SplitMix64::new(100 + seed);
        let made = grow(&dev, &mut w, &lease, &mut model, &mut rng, 40);
        assert!(made > 10, "seed {seed}: {made} writes");
        core.adopt(ino, &lease.writes, Returned).unwrap();
        assert_eq!(contents(&fs, ino, model.len()), model, "seed {seed}");
        let attr = core.getattr(ino).unwrap();
        assert_eq!(attr.size, model.len() as u64);
        drop((dev, core));
        let fs = remounted(fs, ino, &model, &format!("seed {seed}"));
        assert_eq!(fs.core().getattr(ino).unwrap().blocks, attr.blocks);
        assert_clean(&device_of(fs, true));
    }
}

#[test]
fn a_crash_with_growing_writes_out_keeps_them_all() {
    for seed in 0..8u64 {
        println!("seed {seed}");
        let fs = fresh();
        let (ino, mut model) = file(&fs, 3, seed);
        let (core, lease, dev, mut w) = leased_as(&fs, ino, 200, false);
        let mut rng = SplitMix64::new(200 + seed);
        grow(&dev, &mut w, &lease, &mut model, &mut rng, 40);
        drop((dev, core));
        let fs = mount(device_of(fs, false));
        assert_eq!(contents(&fs, ino, model.len()), model, "seed {seed}");
        assert_eq!(fs.core().getattr(ino).unwrap().size, model.len() as u64);
        assert_clean(&device_of(fs, true));
    }
}

/// The slot of the newest valid entry in the log at `log`.
fn newest_entry(dev: &MmapDevice, log: u64) -> (u64, AttrEntry) {
    (0..4u64)
        .filter_map(|i| {
            let mut raw = [0u8; ENTRY_SIZE as usize];
            dev.read(log + i * ENTRY_SIZE, &mut raw);
            match AttrEntry::decode(&raw) {
                Record::Valid(e) => Some((i, e)),
                _ => None,
            }
        })
        .max_by_key(|(_, e)| e.seq)
        .expect("an entry")
}

#[test]
fn a_torn_entry_leaves_its_write_out_and_one_past_the_grant_every_entry() {
    for (unsound, end) in [(false, Abandoned), (true, Returned)] {
        let fs = fresh();
        let (ino, before) = file(&fs, 4, 9);
        let mut model = before.clone();
        let (core, lease, dev, mut w) = leased(&fs, ino, 64);
        let runs = &lease.view.runs;
        w.write(&*dev, runs, model.len() as u64, &[3u8; 5000], time(1))
            .unwrap()
            .unwrap();
        model.extend_from_slice(&[3u8; 5000]);
        let kept = model.clone();
        w.write(&*dev, runs, 100, &[4u8; 9000], time(2))
            .unwrap()
            .unwrap();
        let (slot, mut e) = newest_entry(&dev, lease.log);
        if unsound {
            // A sound checksum over a seq past the grant's: every entry of
            // the lessee goes, and with them its covered writes.
            e.seq = lease.writes.seq + lease.writes.blocks.len() as u64 + 5;
            dev.write(lease.log + slot * ENTRY_SIZE, &e.encode());
        } else {
            // The lessee died inside its second write's entry.
            dev.write(lease.log + slot * ENTRY_SIZE + 20, &[0xff]);
        }
        core.adopt(ino, &lease.writes, end).unwrap();
        let want = if unsound { &before } else { &kept };
        assert_eq!(
            &contents(&fs, ino, want.len() + 100),
            want,
            "unsound {unsound}"
        );
        drop((dev, core));
        let dev = device_of(fs, true);
        assert_clean(&dev);
        let fs = mount(dev);
        assert_eq!(
            &contents(&fs, ino, want.len() + 100),
            want,
            "unsound {unsound}"
        );
    }
}

#[test]
fn a_leased_truncate_grows_with_zeros_and_a_shrink_ends_the_lease() {
    for (crash, seed) in [(false, 1u64), (true, 2), (false, 3), (true, 4)] {
        let fs = fresh();
        let (ino, mut model) = file(&fs, 6, seed);
        // A partial last block whose bytes past the size are old ones.
        let f = OpenOptions::new().write(true).open(&fs, "/f").unwrap();
        f.set_len(model.len() as u64 - 1000).unwrap();
        drop(f);
        model.truncate(model.len() - 1000);
        let (core, lease, dev, mut w) = leased_as(&fs, ino, 64, false);
        let runs = &lease.view.runs;
        let shrunk = |w: &mut Writer, len| w.truncate(&*dev, runs, len, time(60)).unwrap().unwrap();
        if seed % 2 == 1 {
            // Up past the partial block: its old bytes read as zeros.
            let up = model.len() + 3 * BS;
            assert!(!shrunk(&mut w, up as u64));
            model.resize(up, 0);
        }
        let mut rng = SplitMix64::new(seed);
        grow(&dev, &mut w, &lease, &mut model, &mut rng, 10);
        // Below the size the grant found: the daemon's blocks past it go.
        let cut = lease.view.size / 2 + 77;
        assert!(shrunk(&mut w, cut));
        model.truncate(cut as usize);
        // The shrink ended the lease: nothing more is written under it.
        let after = w.write(&*dev, runs, 0, &[1], time(61));
        assert_eq!(after.unwrap_err(), NotMine::Spent);
        assert_eq!(w.size(), cut);
        drop(w);
        let fs = if crash {
            drop((dev, core));
            mount(device_of(fs, false))
        } else {
            core.adopt(ino, &lease.writes, Returned).unwrap();
            drop((dev, core));
            fs
        };
        assert_eq!(contents(&fs, ino, model.len()), model, "seed {seed}");
        // Grown again by the daemon's write past the end: the bytes
        // between read as zeros.
        let f = OpenOptions::new().write(true).open(&fs, "/f").unwrap();
        f.write_at(&[5; 10], cut + 2 * BLOCK_SIZE).unwrap();
        drop(f);
        model.resize((cut + 2 * BLOCK_SIZE) as usize, 0);
        model.extend_from_slice(&[5; 10]);
        assert_eq!(contents(&fs, ino, model.len()), model, "seed {seed}");
        remounted(fs, ino, &model, &format!("seed {seed}"));
    }
}

#[test]
fn a_grant_never_sent_goes_back_without_touching_the_lease_out() {
    let fs = fresh();
    let (ino, mut model) = file(&fs, 3, 11);
    let (core, lease, dev, mut w) = leased_as(&fs, ino, 64, false);
    let mut rng = SplitMix64::new(11);
    grow(&dev, &mut w, &lease, &mut model, &mut rng, 5);
    // A second grant prepared meanwhile (refused by the table before it
    // was sent): the same seqs as the lease out, whose entries it must
    // not read.
    let free = fs.statfs().blocks_free;
    let log = |dev: &MmapDevice| {
        let mut raw = vec![0u8; 4 * ENTRY_SIZE as usize];
        dev.read(lease.log, &mut raw);
        raw
    };
    let before = log(&dev);
    let other = core
        .write_lease(ino, (0, WINDOW_BLOCKS), 16)
        .unwrap()
        .unwrap();
    assert_eq!(other.writes.seq, lease.writes.seq);
    assert_eq!(core.adopt(ino, &other.writes, Unused).unwrap(), 0);
    assert_eq!(fs.statfs().blocks_free, free);
    assert!(log(&dev) == before, "the file's log changed");
    grow(&dev, &mut w, &lease, &mut model, &mut rng, 5);
    core.adopt(ino, &lease.writes, Returned).unwrap();
    assert_eq!(contents(&fs, ino, model.len()), model);
    drop((dev, core));
    assert_clean(&device_of(fs, true));
}

#[test]
fn a_leased_fallocate_fills_holes_with_zeros_and_grows_the_file() {
    for crash in [false, true] {
        let fs = fresh();
        let (ino, mut model) = file(&fs, 6, 11);
        // Blocks 6..12 are holes.
        let f = OpenOptions::new().write(true).open(&fs, "/f").unwrap();
        f.set_len(12 * BLOCK_SIZE).unwrap();
        f.sync_all().unwrap();
        drop(f);
        model.resize(12 * BS, 0);
        let (core, lease, dev, mut w) = leased(&fs, ino, 64);
        let runs = &lease.view.runs;
        let mut allocate = |off, len, keep| w.allocate(&*dev, runs, (off, len), keep, time(70));
        // Over data (block 5) and holes 6-9: the data stays.
        allocate(5 * BLOCK_SIZE + 100, 4 * BLOCK_SIZE, false)
            .unwrap()
            .unwrap();
        // KEEP_SIZE inside the size; past it, the kernel's.
        allocate(10 * BLOCK_SIZE, BLOCK_SIZE, true)
            .unwrap()
            .unwrap();
        let past = allocate(11 * BLOCK_SIZE, 2 * BLOCK_SIZE, true);
        assert_eq!(past.unwrap_err(), NotMine::Shape);
        // Past the end, leaving a gap: the size grows, block 11 stays a hole.
        allocate(12 * BLOCK_SIZE + 3000, 2 * BLOCK_SIZE + 5, false)
            .unwrap()
            .unwrap();
        model.resize(14 * BS + 3005, 0);
        assert_eq!(w.size(), model.len() as u64);
        assert_eq!(w.mapped(), 14, "6 blocks, 5 holes filled, 3 grown");
        drop((dev, core));
        let fs = if crash {
            mount(device_of(fs, false))
        } else {
            fs.core().adopt(ino, &lease.writes, Returned).unwrap();
            fs
        };
        let attr = fs.core().getattr(ino).unwrap();
        // 512-byte units.
        assert_eq!(
            (attr.size, attr.blocks),
            (model.len() as u64, 14 * 8),
            "crash {crash}"
        );
        assert_eq!(contents(&fs, ino, model.len()), model, "crash {crash}");
        let fs = remounted(fs, ino, &model, &format!("crash {crash}"));
        assert_eq!(fs.core().getattr(ino).unwrap().blocks, 14 * 8);
    }
}

/// The file as the lessee reads it: each block from where `w` says it
/// lies, under the slices it wrote (the client's `copy_blocks`).
fn lessee_view(dev: &MmapDevice, w: &Writer, lease: &WriteLease, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    for (fb, piece) in out.chunks_mut(BS).enumerate() {
        let at = w
            .locate(&lease.view.runs, fb as u64)
            .expect("a mapped block");
        dev.read(at, piece);
        w.overlay(dev, fb as u64, 0, piece);
    }
    out
}

#[test]
fn small_overwrites_go_through_the_zone_and_read_back_over_their_blocks() {
    let fs = fresh();
    let (ino, mut model) = file(&fs, 16, 21);
    let (core, lease, dev, mut w) = leased(&fs, ino, 1000);
    let slots = lease.writes.slots.clone().expect("amber grants zone slots");
    assert_eq!(slots.slot_size, 64);
    assert_eq!(slots.count(), 4000);
    let mut rng = SplitMix64::new(22);
    for i in 0..100u64 {
        // 128 bytes, aligned or not, now and then a whole block of a
        // block already written in the zone, and a block's worth across
        // two (SQLite's WAL frame after its 24-byte header): through the
        // zone where either holds slices, else a covered write.
        let fb = rng.next_u64() % 15;
        let (at, len) = match i % 10 {
            0..3 => (rng.next_u64() % 32 * 128, 128),
            3..5 => (rng.next_u64() % (BLOCK_SIZE - 128), 128),
            5..7 => (rng.next_u64() % BLOCK_SIZE, 1),
            7 => (0, BLOCK_SIZE),
            _ => (1 + rng.next_u64() % (BLOCK_SIZE - 1), BLOCK_SIZE),
        };
        let off = fb * BLOCK_SIZE + at;
        let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        match w.write(&*dev, &lease.view.runs, off, &data, time(i as i64)) {
            Ok(r) => r.unwrap(),
            Err(e) => panic!("write {i}: {e:?}"),
        }
        model[off as usize..(off + len) as usize].copy_from_slice(&data);
        assert_eq!(
            lessee_view(&dev, &w, &lease, model.len()),
            model,
            "write {i}"
        );
    }
    assert!(w.moved_any());
    // A block's worth across a block holding slices and the next is one
    // extent, not a return of the lease.
    let sliced = (0..15).find(|&fb| {
        let mut b = vec![0u8; BS];
        dev.read(w.locate(&lease.view.runs, fb).unwrap(), &mut b);
        b[..] != model[fb as usize * BS..(fb as usize + 1) * BS]
    });
    let off = sliced.expect("some block holds slices") * BLOCK_SIZE + 24;
    w.write(&*dev, &lease.view.runs, off, &[9; BS], time(199))
        .unwrap()
        .unwrap();
    model[off as usize..off as usize + BS].fill(9);
    assert_eq!(lessee_view(&dev, &w, &lease, model.len()), model);
    // Blocks this lease wrote slices of: a write that grows the file over
    // one, or a shrink, must wait for the daemon to write them back.
    let last = 15 * BLOCK_SIZE;
    w.write(&*dev, &lease.view.runs, last + 8, &[1; 8], time(200))
        .unwrap()
        .unwrap();
    model[last as usize + 8..last as usize + 16].fill(1);
    assert_eq!(lessee_view(&dev, &w, &lease, model.len()), model);
    let growing = w.write(&*dev, &lease.view.runs, last + 4000, &[1; 200], time(200));
    assert_eq!(growing.unwrap_err(), NotMine::Spent);
    let shrink = w.truncate(&*dev, &lease.view.runs, 100, time(200));
    assert_eq!(shrink.unwrap_err(), NotMine::Spent);
    assert!(core.adopt(ino, &lease.writes, Returned).unwrap() > 0);
    assert_eq!(contents(&fs, ino, model.len()), model);
    // The next grant writes them back and starts above their numbers.
    let next = core
        .write_lease(ino, (0, WINDOW_BLOCKS), 64)
        .unwrap()
        .unwrap();
    assert!(next.writes.slots.as_ref().unwrap().seq > slots.seq);
    core.adopt(ino, &next.writes, Unused).unwrap();
    assert_eq!(contents(&fs, ino, model.len()), model);
    drop((dev, core));
    remounted(fs, ino, &model, "");
}

#[test]
fn the_verifier_drops_a_torn_or_forged_head_and_keeps_the_rest() {
    for end in [Abandoned, Returned] {
        let fs = fresh();
        let (ino, mut model) = file(&fs, 8, 23);
        let (core, lease, dev, mut w) = leased(&fs, ino, 64);
        let slots = lease.writes.slots.clone().expect("amber grants zone slots");
        let run = slots.runs[0];
        let write = |w: &mut Writer, off: u64, b: u8| {
            let r = w.write(&*dev, &lease.view.runs, off, &[b; 128], time(1));
            r.unwrap().unwrap();
        };
        // Slots 0-1, then 2-3.
        write(&mut w, BLOCK_SIZE + 128, 0xaa);
        model[BS + 128..BS + 256].fill(0xaa);
        write(&mut w, 2 * BLOCK_SIZE + 128, 0xbb);
        // The second extent torn: one of its bytes never reached PM.
        dev.write(run.data_at + 2 * 64 + 5, &[0x11]);
        // A head with a sound checksum but a write number past the grant,
        // over slot 8.
        let forged = amber_format::zone_extent::Extent {
            seq: slots.seq + slots.count() + 3,
            slice: (3 * BLOCK_SIZE / 64) as u32,
            ino: ino as u32,
            slots: 1,
        };
        let data = [0xcc; 64];
        dev.write(run.data_at + 8 * 64, &data);
        dev.write(run.head_at + 8 * 32, &forged.encode(&data));
        core.adopt(ino, &lease.writes, end).unwrap();
        assert_eq!(contents(&fs, ino, model.len()), model, "{end:?}");
        drop((dev, core));
        remounted(fs, ino, &model, &format!("{end:?}"));
    }
}

#[test]
fn an_fsync_while_the_write_lease_is_out_writes_no_entry() {
    let fs = fresh();
    let (ino, mut model) = file(&fs, 6, 9);
    // A small write of the daemon's own, as the kernel writes that win a
    // lease make, then a read whose atime stays in DRAM.
    let f = OpenOptions::new().write(true).open(&fs, "/f").unwrap();
    f.write_at(&[7; 16], 0).unwrap();
    model[..16].fill(7);
    contents(&fs, ino, model.len());
    let (core, lease, dev, mut w) = leased_as(&fs, ino, 64, false);
    let cut = lease.view.size / 2 + 77;
    assert!(w
        .truncate(&*dev, &lease.view.runs, cut, time(60))
        .unwrap()
        .unwrap());
    model.truncate(cut as usize);
    // An fsync reaching the core before the shrink's lease is adopted
    // (the daemon settles first; the grant left the core nothing to
    // write) leaves the lessee's entry the newest.
    let before = newest_entry(&dev, lease.log);
    core.fsync(ino).unwrap();
    assert_eq!(newest_entry(&dev, lease.log), before);
    drop(w);
    core.adopt(ino, &lease.writes, Returned).unwrap();
    drop((dev, core, f));
    assert_eq!(contents(&fs, ino, model.len()), model);
    remounted(fs, ino, &model, "an fsync with the lease out");
}
