//! amber's one-fence zone (`amber_zone=extents`, zone version 2): extents
//! partly superseded keep their slots, a head whose checksum fails is
//! cleared at mount and its file shows the older copy, a checked head no
//! protocol writes is refused by mount and cleared by repair, and a pool's
//! zone changes kind at mount without losing a byte.

use amber_core::check::{check, CheckOptions};
use amber_core::fs::read_superblock;
use amber_core::zone::ZoneMedia;
use amber_core::{Fs, MountOptions};
use amber_format::zone_extent::{Extent, EXTENT_SIZE};
use amber_format::FormatParams;
use amber_pmem::{MapOptions, MmapDevice, PmDevice};
use amber_sim::OverlayDevice;
use std::sync::Arc;

mod common;
use common::{assert_clean, device_of, errors, rw};

const POOL: u64 = 8 << 20;
/// One sub-zone of 512-byte slots that never grows: a few writes fill it.
const SMALL: &str = "lawn_zone=1,lawn_slot=512,lawn_subzones=1,lawn_grow=0";

/// A fresh pool in the default (split) layout.
fn fresh() -> MmapDevice {
    let dev = MmapDevice::anonymous(POOL, &MapOptions::default()).unwrap();
    Fs::format(&dev, &FormatParams::for_size(POOL)).unwrap();
    dev
}

/// `lawn_idle_free=0`: slices stay in the zone, idle or at a clean
/// unmount, for these tests to count and damage.
fn opts(more: &str) -> MountOptions {
    MountOptions::parse(&format!(
        "policy=amber,amber_buffer=never,hunter_interval=never,clock=simulated,\
         lawn_idle_free=0,{more}"
    ))
    .unwrap()
}

fn mount(dev: MmapDevice, more: &str) -> Fs<MmapDevice> {
    Fs::mount(dev, opts(more)).unwrap().0
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect()
}

/// A file of `blocks` synced blocks, and its bytes.
fn file(fs: &Fs<MmapDevice>, path: &str, blocks: usize, seed: u8) -> Vec<u8> {
    let data = pattern(blocks * 4096, seed);
    fs.write(path, &data).unwrap();
    fs.core().sync_all().unwrap();
    data
}

fn put(fs: &Fs<MmapDevice>, path: &str, model: &mut [u8], off: usize, data: &[u8]) {
    rw(fs, path).write_at(data, off as u64).unwrap();
    model[off..off + data.len()].copy_from_slice(data);
}

/// Every extent head on the pool whose checksum matches: (entry offset,
/// head).
fn heads(dev: &MmapDevice) -> Vec<(u64, Extent)> {
    let sb = read_superblock(dev).unwrap();
    let z = ZoneMedia::read(dev, &sb.layout, &sb).unwrap().unwrap();
    assert!(z.geo.extents, "a one-fence zone");
    let mut out = Vec::new();
    for &chunk in z.chunks.iter().flatten() {
        for i in 0..z.geo.slots_per_chunk {
            let at = z.geo.desc_offset(chunk, i);
            let mut raw = [0u8; EXTENT_SIZE as usize];
            dev.read(at, &mut raw);
            let Ok(Some(e)) = Extent::decode(&raw) else {
                continue;
            };
            if i + e.slots as u32 > z.geo.slots_per_chunk {
                continue;
            }
            let mut data = vec![0u8; e.slots as usize * z.geo.slot_size as usize];
            dev.read(z.geo.slot_offset(chunk, i), &mut data);
            if Extent::matches(&raw, &data) {
                out.push((at, e));
            }
        }
    }
    out
}

/// An extent of two slices, then a newer one-slice write over its first:
/// the older extent still holds the second slice's newest copy, so none
/// of its slots may be reused until the file is written back — even when
/// another file's writes fill the zone. Every byte survives a remount
/// (which reads every slice's copy through its head).
#[test]
fn a_partly_superseded_extent_keeps_its_slots() {
    let fs = mount(fresh(), SMALL);
    let mut f = file(&fs, "/f", 2, 1);
    let mut g = file(&fs, "/g", 40, 2);
    put(&fs, "/f", &mut f, 0, &pattern(1024, 3));
    put(&fs, "/f", &mut f, 0, &pattern(512, 4));
    // Three slots are f's; the last of these writes is the first to find
    // no free slot past them (a reused slot of f's first extent would
    // lose its second slice there).
    let slots = fs.core().zone().unwrap().occupancy().0 as usize;
    for i in 0..slots - 2 {
        let off = (i % 40) * 4096 + 512 * (i / 40 % 8) + 100;
        put(&fs, "/g", &mut g, off, &pattern(200, 5 + i as u8));
    }
    let fs = mount(device_of(fs, true), SMALL);
    assert_eq!(fs.read("/f").unwrap(), f);
    assert_eq!(fs.read("/g").unwrap(), g);
    assert_clean(&device_of(fs, true));
}

/// A head one byte of which changed reads as a write a crash tore: fsck
/// notes it, mount clears it, and the file shows its older copy of those
/// slices (here its own block's); nothing else changes.
#[test]
fn a_head_whose_checksum_fails_is_cleared() {
    let fs = mount(fresh(), "");
    let old = file(&fs, "/f", 2, 1);
    let mut f = old.clone();
    put(&fs, "/f", &mut f, 5000, &pattern(100, 9));
    let dev = device_of(fs, true);
    let hs = heads(&dev);
    assert_eq!(hs.len(), 1, "one write, one head");
    dev.write_persist(hs[0].0 + 20, &[0x5a]).unwrap();
    let r = check(&dev, &CheckOptions::default()).unwrap();
    assert!(r.is_clean(), "{r}");
    assert!(
        r.problems.iter().any(|p| p.what.contains("checksum fails")),
        "{r}"
    );
    let (fs, rep) = Fs::mount(dev, opts("")).unwrap();
    assert_eq!(rep.zone_descriptors_cleared, 1);
    assert_eq!(fs.read("/f").unwrap(), old);
    let dev = device_of(fs, true);
    assert!(heads(&dev).is_empty());
    assert_clean(&dev);
}

/// A head whose checksum matches but which names an inode outside the
/// table is no write's: mount refuses the pool, fsck says why, repair
/// clears it and the files read as before.
#[test]
fn a_checked_head_no_write_leaves_is_repaired() {
    let fs = mount(fresh(), "");
    let mut f = file(&fs, "/f", 2, 1);
    put(&fs, "/f", &mut f, 5000, &pattern(100, 9));
    let dev = device_of(fs, true);
    let (at, e) = heads(&dev)[0];
    let sb = read_superblock(&dev).unwrap();
    let z = ZoneMedia::read(&dev, &sb.layout, &sb).unwrap().unwrap();
    let first = (at - z.chunks[0][0] * 4096) / EXTENT_SIZE;
    let mut data = vec![0u8; e.slots as usize * z.geo.slot_size as usize];
    dev.read(z.geo.slot_offset(z.chunks[0][0], first as u32), &mut data);
    let bad = Extent {
        ino: u32::MAX - 1,
        ..e
    };
    dev.write_persist(at, &bad.encode(&data)).unwrap();
    let mut image = vec![0u8; dev.size() as usize];
    dev.read(0, &mut image);
    assert!(Fs::mount(OverlayDevice::new(Arc::new(image)), opts("")).is_err());
    let r = check(&dev, &CheckOptions::default()).unwrap();
    assert!(
        errors(&r)
            .iter()
            .any(|w| w.contains("outside the inode table")),
        "{r}"
    );
    let fixed = check(&dev, &CheckOptions { repair: true }).unwrap();
    assert!(fixed.exit_code() <= 1, "{fixed}");
    assert_clean(&dev);
    let fs = mount(dev, "");
    assert_eq!(fs.read("/f").unwrap().len(), f.len());
}

/// A pool's zone changes kind at mount (`amber_zone=`): the other kind's
/// slices go back into their files first, so every byte reads the same.
#[test]
fn the_zone_changes_kind_without_losing_a_byte() {
    let mut dev = fresh();
    let mut model = None;
    for (round, kind) in ["extents", "lawn", "extents", "lawn"].iter().enumerate() {
        let fs = mount(dev, &format!("amber_zone={kind}"));
        let mut f = match model.take() {
            Some(m) => {
                assert_eq!(fs.read("/f").unwrap(), m, "round {round}");
                m
            }
            None => file(&fs, "/f", 4, 1),
        };
        for i in 0..12 {
            let off = i * 1300 % (4 * 4096 - 300);
            put(
                &fs,
                "/f",
                &mut f,
                off,
                &pattern(200, (round * 16 + i) as u8),
            );
        }
        assert!(fs.core().zone().unwrap().occupancy().1 > 0);
        assert_eq!(fs.core().zone().unwrap().geo.extents, *kind == "extents");
        model = Some(f);
        dev = device_of(fs, true);
        assert_clean(&dev);
    }
    let fs = mount(dev, "");
    assert_eq!(fs.read("/f").unwrap(), model.unwrap());
}
