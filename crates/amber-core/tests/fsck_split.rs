//! fsck and repair of split-layout pools with a LAWN small-write zone
//! (policy amber with `amber_zone=lawn`; `zone_extents.rs` has the default
//! one-fence zone's): each one-byte or one-page damage is reported,
//! repair leaves a pool the next check calls clean, and that pool mounts
//! and reads, having lost at most what the damaged bytes held.

use amber_core::check::{check, CheckOptions, CheckReport};
use amber_core::fs::read_superblock;
use amber_core::zone::{read_header, HeaderCopy, ZoneMedia};
use amber_core::{Fs, FsError, MountOptions};
use amber_format::inode::mode;
use amber_format::split::{LogicalInfo, Record, SplitRegions, ATTR_LOG_SIZE, LI_SIZE};
use amber_format::zone::{Descriptor, ZoneGeometry, DESC_SIZE, HEADER_COPY_B};
use amber_format::{FormatParams, Inode, PoolState, Superblock, BLOCK_SIZE, INODE_SIZE};
use amber_pmem::{MapOptions, MmapDevice, PmDevice};
use amber_sim::{enumerate, CrashPoint, EnumConfig, OverlayDevice, RecordingDevice};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

mod common;
use common::{device_of, errors};

const POOL: u64 = 4 << 20;
const CHECK: CheckOptions = CheckOptions { repair: false };
const REPAIR: CheckOptions = CheckOptions { repair: true };
/// Two sub-zones whatever the machine's CPU count, so the zone a mount
/// keeps is the one the pool has; slices stay in it across a clean
/// unmount (`lawn_idle_free=0`), for the tests to damage.
const OPTS: &str = "policy=amber,amber_zone=lawn,hunter_interval=never,clock=simulated,\
                    lawn_subzones=2,lawn_idle_free=0";

/// Every file's bytes, by path.
type Model = BTreeMap<&'static str, Vec<u8>>;

/// The small overwrites `pool` makes, which go through the zone: (path,
/// offset, length, pattern seed). Writing one range twice leaves doomed
/// descriptors behind.
const SMALL: [(&str, usize, usize, u8); 4] = [
    ("/d/a", 100, 300, 9),
    ("/d/a", 100, 300, 10),
    ("/d/a", 9000, 64, 11),
    ("/b", 5000, 200, 12),
];

fn mount(dev: MmapDevice) -> Result<Fs<MmapDevice>, FsError> {
    Fs::mount(dev, MountOptions::parse(OPTS).unwrap()).map(|(fs, _)| fs)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13) ^ seed)
        .collect()
}

/// A cleanly unmounted split pool whose zone holds valid slices of two
/// files (and superseded descriptors), beside a file with no slices.
fn pool() -> (MmapDevice, Model) {
    let dev = MmapDevice::anonymous(POOL, &MapOptions::default()).unwrap();
    Fs::format(&dev, &FormatParams::for_size(POOL)).unwrap();
    let fs = mount(dev).unwrap();
    fs.create_dir("/d").unwrap();
    let mut model = Model::new();
    for (path, blocks, seed) in [("/d/a", 5, 1u8), ("/b", 3, 2), ("/c", 2, 3)] {
        let data = pattern(blocks * 4096 - 100, seed);
        fs.write(path, &data).unwrap();
        model.insert(path, data);
    }
    fs.core().sync_all().unwrap();
    for (path, off, len, seed) in SMALL {
        let f = common::rw(&fs, path);
        let data = pattern(len, seed);
        f.write_at(&data, off as u64).unwrap();
        model.get_mut(path).unwrap()[off..off + len].copy_from_slice(&data);
    }
    assert!(fs.core().zone().is_some_and(|z| z.occupancy().1 > 0));
    (device_of(fs, true), model)
}

fn superblock(dev: &impl PmDevice) -> Superblock {
    read_superblock(dev).unwrap()
}

fn zone(dev: &impl PmDevice) -> ZoneMedia {
    let sb = superblock(dev);
    ZoneMedia::read(dev, &sb.layout, &sb).unwrap().unwrap()
}

fn regions(dev: &MmapDevice) -> SplitRegions {
    superblock(dev).split_regions().unwrap()
}

fn ino_of(dev: MmapDevice, path: &str) -> (MmapDevice, u64) {
    let fs = mount(dev).unwrap();
    let ino = fs.metadata(path).unwrap().attr().ino;
    (device_of(fs, true), ino)
}

/// The offset of the first descriptor in use that `want` picks.
fn descriptor(dev: &MmapDevice, want: impl Fn(&Descriptor) -> bool) -> u64 {
    let z = zone(dev);
    for row in &z.chunks {
        for &chunk in row {
            for i in 0..z.geo.slots_per_chunk {
                let at = z.geo.desc_offset(chunk, i);
                let mut raw = [0u8; DESC_SIZE as usize];
                dev.read(at, &mut raw);
                if Descriptor::decode(&raw).unwrap().is_some_and(|d| want(&d)) {
                    return at;
                }
            }
        }
    }
    panic!("no such descriptor");
}

/// A copy of the pool on `dev`, to mount without changing it.
fn snapshot(dev: &MmapDevice) -> OverlayDevice {
    let mut image = vec![0u8; dev.size() as usize];
    dev.read(0, &mut image);
    OverlayDevice::new(Arc::new(image))
}

/// Whether mount refuses the pool (tried on a copy).
fn refused(dev: &MmapDevice) -> bool {
    Fs::mount(snapshot(dev), MountOptions::parse(OPTS).unwrap()).is_err()
}

/// fsck finds an error naming `words`; repair fixes it (exit 1); the next
/// fsck is clean; the pool mounts, every file reads, and unmounts clean.
/// Returns the repair's report and what each file reads.
fn repaired(dev: MmapDevice, words: &str) -> (CheckReport, BTreeMap<&'static str, Vec<u8>>) {
    let r = check(&dev, &CHECK).unwrap();
    assert_eq!(r.exit_code(), 4, "{r}");
    assert!(
        errors(&r).iter().any(|w| w.contains(words)),
        "no error saying {words:?}:\n{r}"
    );
    let fixed = check(&dev, &REPAIR).unwrap();
    assert_eq!(fixed.exit_code(), 1, "{fixed}");
    let again = check(&dev, &CHECK).unwrap();
    assert_eq!(
        again.exit_code(),
        0,
        "after repair:\n{fixed}\nfsck says:\n{again}"
    );
    let fs = mount(dev).unwrap();
    let mut read = BTreeMap::new();
    for path in ["/d/a", "/b", "/c"] {
        read.insert(path, fs.read(path).unwrap());
    }
    fs.read_dir("/d").unwrap();
    let dev = device_of(fs, true);
    let last = check(&dev, &CHECK).unwrap();
    assert!(
        last.is_clean(),
        "after a mount of the repaired pool: {last}"
    );
    (fixed, read)
}

#[test]
fn the_pool_is_clean_and_reads_back() {
    let (dev, model) = pool();
    let r = check(&dev, &CHECK).unwrap();
    assert_eq!(r.exit_code(), 0, "{r}");
    let fs = mount(dev).unwrap();
    for (path, data) in &model {
        assert_eq!(&fs.read(path).unwrap(), data, "{path}");
    }
}

/// One changed byte in a descriptor's inode field: mount refused the pool
/// while fsck and repair called it clean. Now fsck names it and repair
/// clears the descriptor (a stale one here, so nothing is lost).
#[test]
fn a_descriptor_naming_an_inode_outside_the_table() {
    let (dev, model) = pool();
    // A doomed descriptor of the range written twice: superseded.
    let at = descriptor(&dev, |d| d.doomed);
    dev.write_persist(at + 15, &[0x7f]).unwrap();
    assert!(refused(&dev));
    let (_, read) = repaired(dev, "outside the inode table");
    assert_eq!(read, model);
}

/// One changed byte of a file's logical-information record: repair said
/// "consistent now", the next fsck found the file's chain broken and ls
/// gave EIO. Now repair drops the block from its file (which reads zeros
/// there) and relinks the chain.
#[test]
fn one_changed_byte_of_a_record() {
    let (dev, model) = pool();
    let (dev, ino) = ino_of(dev, "/c");
    let r = regions(&dev);
    let l = superblock(&dev).layout;
    let first = (r.end()..l.total_blocks)
        .find(|&b| {
            let mut raw = [0u8; LI_SIZE as usize];
            dev.read(r.li_offset(b), &mut raw);
            u64::from_le_bytes(raw[8..16].try_into().unwrap()) == ino
                && u64::from_le_bytes(raw[24..32].try_into().unwrap()) == 0
        })
        .unwrap();
    dev.write_persist(r.li_offset(first) + 41, &[1]).unwrap();
    let (fixed, read) = repaired(dev, "torn");
    assert!(fixed.to_string().contains("reads zeros"), "{fixed}");
    let mut want = model["/c"].clone();
    want[..4096].fill(0);
    assert_eq!(read["/c"], want);
    assert_eq!(read["/b"], model["/b"]);
}

/// One changed byte of the zone header (its slot size): every mount and
/// every repair refused the pool. Now mount reads the other copy, repair
/// rewrites the damaged one from it, and every slice is kept.
#[test]
fn one_changed_byte_of_either_zone_header_copy() {
    for copy in [0, HEADER_COPY_B] {
        let (dev, model) = pool();
        let h = zone(&dev).header * BLOCK_SIZE;
        dev.write_persist(h + copy + 12, &[128]).unwrap();
        assert!(!refused(&dev), "mount reads the other copy");
        let (_, read) = repaired(dev, "copy of its header");
        assert_eq!(read, model);
    }
}

/// The header block zeroed: neither copy is left, so repair drops the
/// zone. Its slices' newest bytes are lost, every other byte is kept.
#[test]
fn a_zeroed_zone_header_block() {
    let (dev, model) = pool();
    let h = zone(&dev).header * BLOCK_SIZE;
    dev.write_persist(h, &[0u8; BLOCK_SIZE as usize]).unwrap();
    assert!(refused(&dev));
    let (fixed, read) = repaired(dev, "zone header");
    assert!(fixed.to_string().contains("dropped"), "{fixed}");
    for (path, data) in &model {
        let mut got = read[path].clone();
        assert_eq!(got.len(), data.len(), "{path}");
        let mut want = data.clone();
        for &(_, off, len, _) in SMALL.iter().filter(|s| s.0 == *path) {
            got[off..off + len].fill(0);
            want[off..off + len].fill(0);
        }
        assert_eq!(got, want, "{path}: bytes outside the small writes changed");
    }
}

/// One changed byte of a chunk-table entry: that chunk leaves the zone,
/// the others keep their slices.
#[test]
fn one_changed_byte_of_the_chunk_table() {
    let (dev, model) = pool();
    let z = zone(&dev);
    let at = ZoneGeometry::table_entry(z.header, 1, 0);
    dev.write_persist(at + 5, &[0x40]).unwrap();
    let (_, read) = repaired(dev, "chunk");
    assert_eq!(read["/c"], model["/c"]);
}

/// A zeroed attribute-log page (sixteen files' logs): repair exited 4.
/// Now each file that had blocks gets an entry rebuilt from its records,
/// its size rounded up to whole blocks, and the report says so.
#[test]
fn a_zeroed_attribute_log_page() {
    let (dev, model) = pool();
    let (dev, ino) = ino_of(dev, "/d/a");
    let r = regions(&dev);
    let page = r.attr_start * BLOCK_SIZE + (ino * ATTR_LOG_SIZE / BLOCK_SIZE) * BLOCK_SIZE;
    dev.write_persist(page, &[0u8; BLOCK_SIZE as usize])
        .unwrap();
    let (fixed, read) = repaired(dev, "attribute");
    assert!(fixed.to_string().contains("rounded up"), "{fixed}");
    for (path, data) in &model {
        let got = &read[path];
        assert_eq!(&got[..data.len()], &data[..], "{path}");
        assert_eq!(
            got.len() as u64,
            (data.len() as u64).div_ceil(BLOCK_SIZE) * BLOCK_SIZE
        );
    }
}

/// Descriptors no protocol leaves (committed in another file's sub-zone,
/// past a size) were errors repair could not fix: it now clears them.
#[test]
fn corrupt_descriptors_are_cleared() {
    let (dev, model) = pool();
    // The slice of /d/a at 9000, written once: committed.
    let at = descriptor(&dev, |d| d.slice == 9000 / 64);
    let mut raw = [0u8; DESC_SIZE as usize];
    dev.read(at, &mut raw);
    // Slice 100000 of the same file: committed and far past its size.
    raw[8..12].copy_from_slice(&100_000u32.to_le_bytes());
    dev.write_persist(at, &raw).unwrap();
    let (_, read) = repaired(dev, "past its size");
    assert_eq!(read["/c"], model["/c"]);
}

/// A zone an older amberfs made has no second header copy: mount writes
/// it. A crash at any fence of that mount leaves a pool that mounts,
/// reads back every file, and checks clean with both copies once
/// unmounted.
#[test]
fn a_mount_adding_the_second_header_copy_is_crash_safe() {
    let (dev, model) = pool();
    let h = zone(&dev).header * BLOCK_SIZE;
    dev.write_persist(h + HEADER_COPY_B, &[0u8; 64]).unwrap();
    let mut image = vec![0u8; POOL as usize];
    dev.read(0, &mut image);
    let rec = Arc::new(RecordingDevice::from_image(image));
    let points: Arc<Mutex<Vec<CrashPoint>>> = Arc::default();
    let sink = Arc::clone(&points);
    rec.set_fence_hook(Some(Box::new(move |p: &CrashPoint| {
        sink.lock().unwrap().push(p.clone())
    })));
    rec.arm_fence_hook(true);
    let opts = MountOptions::parse(OPTS).unwrap();
    let (fs, _) = amber_core::fs::mount(Arc::clone(&rec), opts.clone()).unwrap();
    rec.arm_fence_hook(false);
    drop(fs);
    let points = std::mem::take(&mut *points.lock().unwrap());
    assert!(!points.is_empty());
    let mut images = 0;
    for p in &points {
        for image in enumerate(p, &EnumConfig::default()).images {
            let crashed = OverlayDevice::from_crash(p, &image);
            let (fs, _) = Fs::mount(crashed, opts.clone()).unwrap();
            for (path, data) in &model {
                assert_eq!(&fs.read(path).unwrap(), data, "{path}");
            }
            let dev = Arc::clone(fs.core().device());
            fs.unmount().unwrap();
            let r = check(&*dev, &CHECK).unwrap();
            assert!(r.is_clean(), "{r}");
            let copies = read_header(&*dev, zone(&*dev).header);
            assert!(copies.iter().all(|c| matches!(c, HeaderCopy::Valid(_))));
            images += 1;
        }
    }
    assert!(images > points.len());
}

/// Reads every directory, file and symlink through a mount: what `ls
/// -R`, `cat` and `readlink` do. Err names what failed.
fn usable(dev: &MmapDevice) -> Result<(), String> {
    let opts = MountOptions::parse(OPTS).unwrap();
    let (fs, _) = Fs::mount(snapshot(dev), opts).map_err(|e| format!("mount: {e}"))?;
    let mut dirs = vec!["/".to_string()];
    while let Some(d) = dirs.pop() {
        for e in fs.read_dir(&d).map_err(|e| format!("ls {d}: {e}"))? {
            let p = format!("{}{}", d, e.name);
            let res = match e.file_type {
                t if t.is_dir() => {
                    dirs.push(format!("{p}/"));
                    continue;
                }
                t if t.is_symlink() => fs.read_link(&p).map(drop),
                _ => fs.read(&p).map(drop),
            };
            res.map_err(|e| format!("{p}: {e}"))?;
        }
    }
    Ok(())
}

/// Sets a field of inode `ino` through `f`.
fn patch_inode(dev: &MmapDevice, ino: u64, f: impl Fn(&mut Inode)) {
    let off = superblock(dev).layout.inode_offset(ino);
    let mut raw = [0u8; INODE_SIZE];
    dev.read(off, &mut raw);
    let mut i = Inode::decode(&raw);
    f(&mut i);
    dev.write_persist(off, &i.encode()).unwrap();
}

/// Marks the pool as not cleanly unmounted, so mount runs recovery.
fn crashed(dev: &MmapDevice) {
    let mut sb = superblock(dev);
    sb.state = PoolState::Dirty;
    for off in Superblock::copy_offsets() {
        dev.write_persist(off, &sb.encode()).unwrap();
    }
}

/// A record naming `li`, stored for block `b`.
fn put_record(dev: &MmapDevice, b: u64, li: &LogicalInfo) {
    dev.write_persist(regions(dev).li_offset(b), &li.encode())
        .unwrap();
}

/// A record of write 1 for file block `fb` of inode `ino`.
fn record_of(ino: u64, fb: u64) -> LogicalInfo {
    LogicalInfo {
        seq: 1,
        ino,
        generation: 1,
        file_block: fb,
        link: 0,
        own: None,
    }
}

/// The record of block `b`.
fn record(dev: &MmapDevice, b: u64) -> LogicalInfo {
    let mut raw = [0u8; LI_SIZE as usize];
    dev.read(regions(dev).li_offset(b), &mut raw);
    match LogicalInfo::decode(&raw) {
        Record::Valid(li) => li,
        other => panic!("block {b}: {other:?}"),
    }
}

/// The last block of the pool: free in the pool `pool` makes.
fn last_block(dev: &MmapDevice) -> u64 {
    superblock(dev).layout.total_blocks - 1
}

/// Every reason mount (or the first read of a file) refuses a pool, as
/// one damage each: fsck finds it, and, where repair can decide, repair
/// leaves a pool that mounts and reads. Inode numbers: / 1, /d 2, /d/a 3,
/// /b 4, /c 5.
// Tests are exempt from the 80-line limit: one damage after another.
#[allow(clippy::too_many_lines)]
#[test]
fn whatever_mount_refuses_fsck_finds() {
    type Damage = fn(&MmapDevice);
    let cases: [(&str, Damage, bool); 16] = [
        (
            "zone descriptor in another file's sub-zone",
            |d| {
                let at = descriptor(d, |x| x.slice == 9000 / 64 && x.ino == 3);
                d.write_persist(at + 12, &4u32.to_le_bytes()).unwrap();
            },
            true,
        ),
        (
            "two committed copies of one slice",
            |d| {
                let at = descriptor(d, |x| x.slice == 9000 / 64 && x.ino == 3);
                let mut raw = [0u8; DESC_SIZE as usize];
                d.read(at, &mut raw);
                let z = zone(d);
                let chunk = z.chunks[1][0];
                let free = (0..z.geo.slots_per_chunk)
                    .map(|i| z.geo.desc_offset(chunk, i))
                    .find(|&o| d.load_u64(o + 8) == 0)
                    .unwrap();
                d.write_persist(free, &raw).unwrap();
            },
            true,
        ),
        (
            "zone descriptor bytes no store writes",
            |d| {
                let at = descriptor(d, |x| x.ino == 3);
                d.write_persist(at + 12, &0u32.to_le_bytes()).unwrap();
            },
            true,
        ),
        (
            "chunk-table entry past the sub-zones",
            |d| {
                let z = zone(d);
                let b = z.chunks[0][0];
                let at = ZoneGeometry::table_entry(z.header, 5, 0);
                d.write_persist(at, &b.to_le_bytes()).unwrap();
            },
            true,
        ),
        (
            "zone chunk free in the saved bitmap",
            |d| {
                let l = superblock(d).layout;
                let b = zone(d).chunks[0][0];
                let off = l.bitmap_start * BLOCK_SIZE + b / 8;
                let mut byte = [0u8];
                d.read(off, &mut byte);
                d.write_persist(off, &[byte[0] & !(1 << (b % 8))]).unwrap();
            },
            true,
        ),
        (
            "directory block-map root outside the data area",
            |d| {
                patch_inode(d, 2, |i| i.map_root = 3);
            },
            true,
        ),
        (
            "the same, after a crash",
            |d| {
                patch_inode(d, 2, |i| i.map_root = 3);
                crashed(d);
            },
            true,
        ),
        (
            "inode with no file type, after a crash",
            |d| {
                patch_inode(d, 5, |i| i.mode = 0o170644);
                crashed(d);
            },
            true,
        ),
        (
            "attribute block outside the data area, after a crash",
            |d| {
                patch_inode(d, 4, |i| i.xattr_block = 2);
                crashed(d);
            },
            true,
        ),
        (
            "record naming an inode outside the table, after a crash",
            |d| {
                put_record(d, last_block(d), &record_of(1 << 40, 0));
                crashed(d);
            },
            true,
        ),
        (
            "record of a block past the largest file, after a crash",
            |d| {
                put_record(d, last_block(d), &record_of(5, 1 << 40));
                crashed(d);
            },
            true,
        ),
        (
            "record of a metadata block, after a crash",
            |d| {
                put_record(d, regions(d).attr_start, &record_of(5, 9));
                crashed(d);
            },
            true,
        ),
        (
            "two records of one write for one file block, after a crash",
            |d| {
                let ino = 5;
                let r = regions(d);
                let l = superblock(d).layout;
                let b = (r.end()..l.total_blocks)
                    .find(|&b| {
                        let mut raw = [0u8; LI_SIZE as usize];
                        d.read(r.li_offset(b), &mut raw);
                        matches!(LogicalInfo::decode(&raw), Record::Valid(li) if li.ino == ino)
                    })
                    .unwrap();
                put_record(d, last_block(d), &record(d, b));
                crashed(d);
            },
            true,
        ),
        (
            "the zone header's both copies",
            |d| {
                let h = zone(d).header * BLOCK_SIZE;
                d.write_persist(h + 20, &[1]).unwrap();
                d.write_persist(h + HEADER_COPY_B + 20, &[1]).unwrap();
            },
            true,
        ),
        (
            "a block owned by two directories, after a crash",
            |d| {
                let root = {
                    let mut raw = [0u8; INODE_SIZE];
                    d.read(superblock(d).layout.inode_offset(1), &mut raw);
                    Inode::decode(&raw).map_root
                };
                patch_inode(d, 2, |i| i.map_root = root);
                crashed(d);
            },
            false,
        ),
        (
            "a root inode that is not a directory",
            |d| {
                patch_inode(d, 1, |i| i.mode = mode::S_IFREG | 0o644);
            },
            false,
        ),
    ];
    for (name, damage, repairable) in cases {
        let (dev, _) = pool();
        damage(&dev);
        assert!(usable(&dev).is_err(), "{name}: the pool is still usable");
        let r = check(&dev, &CHECK).unwrap();
        assert_eq!(r.exit_code(), 4, "{name}: fsck says\n{r}");
        let fixed = check(&dev, &REPAIR).unwrap();
        if !repairable {
            assert_eq!(fixed.exit_code(), 4, "{name}: repair says\n{fixed}");
            continue;
        }
        assert!(fixed.exit_code() <= 1, "{name}: repair says\n{fixed}");
        let again = check(&dev, &CHECK).unwrap();
        assert_eq!(again.exit_code(), 0, "{name}: after repair\n{again}");
        usable(&dev).unwrap_or_else(|e| panic!("{name}: after repair, {e}\n{fixed}"));
    }
}

/// A zeroed inode line frees the inode and resets its generation, while
/// its attribute log keeps the old file's entries: the next file made in
/// that inode took them (and their chain) for its own, and its first
/// write failed. Repair now raises the free inode's generation past them.
#[test]
fn a_reused_inode_never_inherits_an_old_files_entries() {
    let (dev, _) = pool();
    let off = superblock(&dev).layout.inode_offset(5);
    dev.write_persist(off, &[0u8; 64]).unwrap();
    let fixed = check(&dev, &REPAIR).unwrap();
    assert_eq!(fixed.exit_code(), 1, "{fixed}");
    assert!(
        fixed.to_string().contains("inode 5 has generation 0"),
        "{fixed}"
    );
    let fs = mount(dev).unwrap();
    let data = pattern(5000, 7);
    let mut reused = false;
    for n in 0..8 {
        let p = format!("/n{n}");
        fs.write(&p, &data).unwrap();
        assert_eq!(fs.read(&p).unwrap(), data, "{p}");
        reused |= fs.metadata(&p).unwrap().attr().ino == 5;
    }
    assert!(reused, "no new file took inode 5");
    let dev = device_of(fs, true);
    let r = check(&dev, &CHECK).unwrap();
    assert!(r.is_clean(), "{r}");
}
