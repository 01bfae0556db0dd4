//! The pools the image target damages: small, holding every kind of
//! structure each layout has, cleanly unmounted or crashed, each with the
//! byte ranges of its regions so damage can be aimed at every one of
//! them. Built once per process.

use amber_core::zone::ZoneMedia;
use amber_core::{Fs, MountOptions};
use amber_format::zone::HEADER_BLOCKS;
use amber_format::{FormatParams, PoolLayout, Superblock, BLOCK_SIZE};
use amber_sim::OverlayDevice;
use std::sync::{Arc, OnceLock};

/// A named byte range of a pool.
#[derive(Debug, Clone)]
pub struct Region {
    pub name: String,
    pub start: u64,
    pub len: u64,
}

/// One pool to damage.
pub struct Base {
    pub name: &'static str,
    pub image: Arc<Vec<u8>>,
    /// Every region of the pool, the whole pool last.
    pub regions: Vec<Region>,
    /// How it is mounted: its layout's policy, nothing timed, a fixed
    /// sub-zone count (a mount asking for another folds the zone back).
    pub options: MountOptions,
}

const CLASSIC: &str = "policy=direct,clock=simulated";
const LFS: &str = "policy=hunter-lfs,hunter_interval=never,clock=simulated";
const NOVA: &str = "policy=nova,clock=simulated";
/// `lawn_idle_free=0`: the idle-time thread leaves the zone's slices in
/// place, so the pool keeps valid ones to damage.
const SPLIT: &str =
    "policy=amber,hunter_interval=never,clock=simulated,lawn_subzones=2,lawn_idle_free=0";

/// The pools, built on first use.
pub fn bases() -> &'static [Base] {
    static BASES: OnceLock<Vec<Base>> = OnceLock::new();
    BASES.get_or_init(|| {
        vec![
            base("classic", PoolLayout::Classic, CLASSIC, true),
            base("classic-crashed", PoolLayout::Classic, CLASSIC, false),
            base("split", PoolLayout::Split, SPLIT, true),
            base("split-crashed", PoolLayout::Split, SPLIT, false),
            base("lfs", PoolLayout::Lfs, LFS, true),
            base("nova", PoolLayout::Nova, NOVA, true),
            base("nova-crashed", PoolLayout::Nova, NOVA, false),
        ]
    })
}

fn base(name: &'static str, layout: PoolLayout, opts: &str, unmount: bool) -> Base {
    const SIZE: u64 = 1 << 20;
    let params = FormatParams {
        pool_size: SIZE,
        inode_count: 64,
        journal_count: 2,
        journal_blocks: 8,
        layout,
    };
    let dev = OverlayDevice::new(Arc::new(vec![0u8; SIZE as usize]));
    Fs::format(&dev, &params).expect("format");
    let options = MountOptions::parse(opts).expect("options");
    let (fs, _) = Fs::mount(dev, options.clone()).expect("mount");
    populate(&fs).expect("populate");
    let dev = Arc::clone(fs.core().device());
    if unmount {
        fs.unmount().expect("unmount");
    } else {
        crash(&fs).expect("the writes before the crash");
        drop(fs);
    }
    let image = Arc::new(dev.to_image());
    Base {
        name,
        regions: regions(&dev),
        image,
        options,
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

/// Directories, files of several blocks, a sparse one, both kinds of
/// symlink, a hard link, a FIFO, an attribute, a rename, an unlink and a
/// truncate, all persisted; then small overwrites (through the zone in a
/// split pool, once and twice).
fn populate(fs: &Fs<OverlayDevice>) -> amber_core::Result<()> {
    fs.create_dir_all("/a/b")?;
    fs.write("/a/big", &pattern(5 * 4096 + 10, 1))?;
    fs.write("/small", b"hello")?;
    fs.write("/a/b/sparse", b"")?;
    let sparse = amber_core::OpenOptions::new()
        .write(true)
        .open(fs, "/a/b/sparse")?;
    sparse.write_at(b"far", 300 * 4096)?;
    fs.write("/gone", &pattern(9000, 2))?;
    fs.write("/cut", &pattern(3 * 4096, 3))?;
    fs.symlink("a/big", "/short")?;
    fs.symlink(&"x".repeat(300), "/a/long")?;
    fs.hard_link("/small", "/a/b/link")?;
    fs.core().mknod(
        amber_format::ROOT_INO,
        b"fifo",
        amber_format::FileKind::Fifo,
        0o644,
        0,
        owner(),
    )?;
    let small = fs.metadata("/small")?.attr().ino;
    fs.core().setxattr(
        small,
        b"user.tag",
        b"blue",
        amber_core::fs::XattrSet::Either,
    )?;
    fs.create_dir("/c")?;
    fs.rename("/c", "/a/moved")?;
    fs.core().sync_all()?;
    fs.remove_file("/gone")?;
    amber_core::OpenOptions::new()
        .write(true)
        .open(fs, "/cut")?
        .set_len(5000)?;
    let big = amber_core::OpenOptions::new()
        .write(true)
        .open(fs, "/a/big")?;
    for (off, len, seed) in [
        (100, 300, 9),
        (100, 300, 10),
        (9000, 64, 11),
        (20000, 200, 12),
    ] {
        big.write_at(&pattern(len, seed), off)?;
    }
    Ok(())
}

fn owner() -> amber_core::Owner {
    amber_core::Owner::new(1000, 1000)
}

/// What a crashed pool was doing: writes nobody synced, a new file, an
/// unlink, a small overwrite. The small overwrite comes last: a block
/// write of the file writes the file's zone slices back first (amber's
/// one-fence zone: all of them), and the crashed split pool must keep
/// some in its zone for the damage to hit.
fn crash(fs: &Fs<OverlayDevice>) -> amber_core::Result<()> {
    fs.write("/new", &pattern(6000, 5))?;
    let big = amber_core::OpenOptions::new()
        .write(true)
        .open(fs, "/a/big")?;
    big.write_at(&pattern(4096, 7), 8192)?;
    big.write_at(&pattern(50, 6), 4000)?;
    fs.remove_file("/a/b/link")?;
    Ok(())
}

/// The byte ranges of every region of the pool on `dev`.
fn regions(dev: &OverlayDevice) -> Vec<Region> {
    let sb = amber_core::fs::read_superblock(dev).expect("a pool");
    let l = sb.layout;
    let b = BLOCK_SIZE;
    let mut out = vec![
        region("superblock A", 0, 1),
        region("superblock B", 1, 1),
        region(
            "journals",
            l.journal_start,
            l.itable_start - l.journal_start,
        ),
        region(
            "inode table",
            l.itable_start,
            l.bitmap_start - l.itable_start,
        ),
        region("saved bitmap", l.bitmap_start, l.bitmap_blocks),
    ];
    if let Some(r) = sb.split_regions() {
        out.push(region("attribute logs", r.attr_start, r.attr_blocks));
        out.push(region("logical information", r.li_start, r.li_blocks));
    }
    let data = sb.split_regions().map_or(l.data_start, |r| r.end());
    out.push(region("first data blocks", data, 24));
    out.extend(zone_regions(dev, &sb));
    out.push(Region {
        name: "anywhere".into(),
        start: 0,
        len: l.total_blocks * b,
    });
    out
}

fn region(name: &str, block: u64, blocks: u64) -> Region {
    Region {
        name: name.into(),
        start: block * BLOCK_SIZE,
        len: blocks * BLOCK_SIZE,
    }
}

/// The zone's header block, chunk table, and each chunk's descriptor and
/// slot blocks.
fn zone_regions(dev: &OverlayDevice, sb: &Superblock) -> Vec<Region> {
    let Ok(Some(z)) = ZoneMedia::read(dev, &sb.layout, sb) else {
        return Vec::new();
    };
    let mut out = vec![
        region("zone header", z.header, 1),
        region("zone chunk table", z.header + 1, HEADER_BLOCKS - 1),
    ];
    let desc = z.geo.desc_blocks as u64;
    for &chunk in z.chunks.iter().flatten() {
        out.push(region("zone descriptors", chunk, desc));
        out.push(region(
            "zone slots",
            chunk + desc,
            z.geo.chunk_blocks as u64 - desc,
        ));
    }
    out
}
