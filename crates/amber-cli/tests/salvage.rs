//! `amberfs salvage` and `amberfs get -r` as a user runs them: a pool is
//! populated through the library (so the small-write zone holds slices),
//! damaged in one way at a time, and salvage must copy out every file the
//! damage did not touch, byte for byte, at its path or (when its
//! directory was lost) in lost+found, and leave the pool unchanged.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use amber_core::{Fs, MountOptions, OpenOptions};
use amber_format::split::SplitRegions;
use amber_format::zone::REGION_ZONE_START;
use amber_format::{FormatParams, Inode, Superblock, BLOCK_SIZE, INODE_SIZE, SUPERBLOCK_SIZE};
use amber_pmem::{MapOptions, MmapDevice};

const POOL: u64 = 32 << 20;

fn amberfs<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_amberfs"))
        .args(args)
        .output()
        .expect("run amberfs")
}

/// Deterministic bytes (xorshift64*) distinct per `seed`.
fn bytes(len: usize, mut state: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        out.extend_from_slice(&state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// One file of the test tree.
struct Made {
    path: &'static str,
    ino: u64,
    data: Vec<u8>,
}

/// The pristine pool image and what it holds.
struct Pristine {
    image: Vec<u8>,
    files: Vec<Made>,
    /// Files with slices in the small-write zone.
    zoned: HashSet<u64>,
    dir_b: u64,
    dir_c: u64,
}

const TREE: [(&str, usize); 6] = [
    ("/a/f1", 5 * 4096),
    ("/a/f2", 10_000),
    ("/b/c/f3", 50_000),
    ("/b/f4", 3000),
    ("/top", 200),
    ("/b/c/f5", 9000),
];

/// Populates a pool through the library: the tree above, every file
/// fsync'd, then small overwrites of /a/f1 (zone slices). `clean`:
/// unmounted cleanly, else dropped as if the process died.
fn pristine(clean: bool) -> Pristine {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = dir.path().join("p.pool");
    let dev = MmapDevice::create(&path, POOL, &MapOptions::default()).unwrap();
    Fs::format(&dev, &FormatParams::for_size(POOL)).unwrap();
    let opts = MountOptions::parse("clock=simulated,hunter_interval=never").unwrap();
    let (fs, _) = Fs::mount(dev, opts).unwrap();
    fs.create_dir_all("/a").unwrap();
    fs.create_dir_all("/b/c").unwrap();
    let mut files = Vec::new();
    for (i, (p, len)) in TREE.into_iter().enumerate() {
        let mut data = bytes(len, i as u64 + 1);
        let f = OpenOptions::new()
            .write(true)
            .create(true)
            .open(&fs, p)
            .unwrap();
        f.write_at(&data, 0).unwrap();
        f.sync_all().unwrap();
        if p == "/a/f1" {
            for off in [100usize, 9000] {
                f.write_at(&[0xEE; 64], off as u64).unwrap();
                data[off..off + 64].fill(0xEE);
            }
        }
        let ino = f.ino();
        files.push(Made { path: p, ino, data });
    }
    fs.symlink("../f4", "/b/c/link").unwrap();
    let zoned = HashSet::from([files[0].ino]);
    let dir_b = fs.metadata("/b").unwrap().attr().ino;
    let dir_c = fs.metadata("/b/c").unwrap().attr().ino;
    let dev = fs.core().device().clone();
    if clean {
        fs.unmount().unwrap();
    } else {
        drop(fs);
    }
    drop(dev);
    Pristine {
        image: std::fs::read(&path).unwrap(),
        files,
        zoned,
        dir_b,
        dir_c,
    }
}

fn superblock(image: &[u8]) -> Superblock {
    Superblock::decode(image[..SUPERBLOCK_SIZE].try_into().unwrap()).unwrap()
}

fn split(image: &[u8]) -> SplitRegions {
    superblock(image).split_regions().expect("a split pool")
}

/// Where `ino`'s inode lies.
fn inode_at(image: &[u8], ino: u64) -> usize {
    superblock(image).layout.inode_offset(ino) as usize
}

/// The pool block holding the first 4 KiB of `data`.
fn block_of(image: &[u8], data: &[u8]) -> u64 {
    let want = &data[..4096.min(data.len())];
    let at = image
        .chunks(BLOCK_SIZE as usize)
        .position(|b| &b[..want.len()] == want)
        .expect("the file's first block is in the pool");
    at as u64
}

/// Runs `amberfs salvage` on `image` with `damage` applied; checks the
/// pool was left unchanged, then every file not in `touched` came out
/// whole. Returns the copy's directory (kept alive) and the output.
fn salvage_after(
    p: &Pristine,
    damage: impl FnOnce(&mut Vec<u8>),
    touched: &HashSet<u64>,
) -> (tempfile::TempDir, PathBuf, Output) {
    let tmp = tempfile::tempdir().unwrap();
    let pool = tmp.path().join("damaged.pool");
    let mut image = p.image.clone();
    damage(&mut image);
    std::fs::write(&pool, &image).unwrap();
    let out = tmp.path().join("out");
    let run = amberfs(&["salvage".as_ref(), pool.as_os_str(), out.as_os_str()]);
    let err = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        std::fs::read(&pool).unwrap() == image,
        "salvage wrote the pool"
    );
    for f in p.files.iter().filter(|f| !touched.contains(&f.ino)) {
        let name = f.path.rsplit('/').next().unwrap();
        let found = [
            out.join(&f.path[1..]),
            out.join("lost+found").join(format!("#{}", f.ino)),
        ]
        .into_iter()
        .chain(under(&out.join("lost+found"), name))
        .find(|c| c.is_file())
        .unwrap_or_else(|| panic!("{} was not salvaged: {err}", f.path));
        assert!(
            std::fs::read(&found).unwrap() == f.data,
            "{} came out with other bytes ({}): {err}",
            f.path,
            found.display()
        );
    }
    (tmp, out, run)
}

/// Every path under `dir` (recursively) whose last component is `name`:
/// a file of a directory that no path reached keeps its name inside that
/// directory's copy in lost+found.
fn under(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p.clone());
            }
            if e.file_name() == name {
                found.push(p);
            }
        }
    }
    found
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_healthy_pool_comes_out_whole() {
    let p = pristine(true);
    let (_tmp, out, run) = salvage_after(&p, |_| {}, &HashSet::new());
    assert!(run.status.success(), "{}", stderr(&run));
    assert_eq!(
        std::fs::read_link(out.join("b/c/link")).unwrap(),
        Path::new("../f4")
    );
    assert!(!out.join("lost+found").exists(), "nothing was lost");
}

#[test]
fn a_crashed_pool_is_recovered_in_memory() {
    let p = pristine(false);
    let (_tmp, _out, run) = salvage_after(&p, |_| {}, &HashSet::new());
    assert!(run.status.success(), "{}", stderr(&run));
    assert!(stderr(&run).contains("in memory only"), "{}", stderr(&run));
}

#[test]
fn one_damaged_zone_header_copy_costs_nothing() {
    let p = pristine(true);
    let header = superblock(&p.image).regions[REGION_ZONE_START] as usize * 4096;
    let (_tmp, _out, run) = salvage_after(&p, |img| img[header + 12] ^= 0x40, &HashSet::new());
    assert!(run.status.success(), "{}", stderr(&run));
}

#[test]
fn both_damaged_zone_header_copies_cost_only_its_slices() {
    let p = pristine(true);
    let header = superblock(&p.image).regions[REGION_ZONE_START] as usize * 4096;
    // The second copy is the last 64 bytes of the header block.
    let damage = |img: &mut Vec<u8>| {
        img[header + 12] ^= 0x40;
        img[header + 4096 - 64 + 12] ^= 0x40;
    };
    let (_tmp, _out, run) = salvage_after(&p, damage, &p.zoned);
    let err = stderr(&run);
    assert!(err.contains("small-write zone"), "{err}");
    // Without the zone, /a/f1 comes out as its blocks hold it.
    assert!(run.status.success(), "{err}");
}

#[test]
fn a_damaged_record_costs_its_file() {
    let p = pristine(true);
    let f3 = &p.files[2];
    let at = split(&p.image).li_offset(block_of(&p.image, &f3.data)) as usize;
    let touched = HashSet::from([f3.ino]);
    let (_tmp, _out, run) = salvage_after(&p, |img| img[at + 8] ^= 1, &touched);
    assert_eq!(run.status.code(), Some(1), "the damaged file is reported");
    assert!(stderr(&run).contains("skipped /b/c/f3"), "{}", stderr(&run));
}

#[test]
fn a_zeroed_attribute_log_page_costs_its_files_alone() {
    let p = pristine(true);
    let f2 = &p.files[1];
    let r = split(&p.image);
    let page = (r.attr_start * BLOCK_SIZE) as usize + (f2.ino as usize * 256) / 4096 * 4096;
    let per_page = 4096 / 256;
    let touched: HashSet<u64> = p
        .files
        .iter()
        .map(|f| f.ino)
        .filter(|i| i / per_page == f2.ino / per_page)
        .collect();
    salvage_after(&p, |img| img[page..page + 4096].fill(0), &touched);
}

#[test]
fn a_damaged_inode_costs_its_file() {
    let p = pristine(true);
    let f4 = &p.files[3];
    let at = inode_at(&p.image, f4.ino);
    let touched = HashSet::from([f4.ino]);
    // Mode bits no file kind has.
    let (_tmp, _out, run) = salvage_after(&p, |img| img[at + 1] = 0xFF, &touched);
    assert!(stderr(&run).contains("/b/f4"), "{}", stderr(&run));
}

#[test]
fn files_of_a_damaged_directory_go_to_lost_and_found() {
    let p = pristine(true);
    let raw: [u8; INODE_SIZE] = p.image[inode_at(&p.image, p.dir_c)..][..INODE_SIZE]
        .try_into()
        .unwrap();
    let block = Inode::decode(&raw).map_root as usize * 4096;
    // The checksum of the entry in slot 0, /b/c/f3 (the first made).
    let (_tmp, out, run) = salvage_after(&p, |img| img[block + 12] ^= 1, &HashSet::new());
    assert_eq!(run.status.code(), Some(1));
    let err = stderr(&run);
    assert!(
        err.contains("skipped /b/c: block 0 slot 0: checksum"),
        "{err}"
    );
    let f3 = &p.files[2];
    assert!(
        out.join(format!("lost+found/#{}", f3.ino)).is_file(),
        "{err}"
    );
    assert!(
        out.join("b/c/f5").is_file(),
        "the other entries keep their paths"
    );
    assert!(out.join("b/c/link").is_symlink());
    assert!(out.join("b/f4").is_file());
}

#[test]
fn both_superblocks_damaged_by_a_byte_each() {
    let p = pristine(true);
    let (_tmp, _out, run) = salvage_after(
        &p,
        |img| {
            img[136] ^= 1;
            img[4096 + 168] ^= 1;
        },
        &HashSet::new(),
    );
    assert!(run.status.success(), "{}", stderr(&run));
    assert!(stderr(&run).contains("checksum"), "{}", stderr(&run));
}

#[test]
fn both_superblocks_zeroed_falls_back_to_mkfs_geometry() {
    let p = pristine(true);
    let (_tmp, _out, run) = salvage_after(
        &p,
        |img| {
            img[..SUPERBLOCK_SIZE].fill(0);
            img[4096..4096 + SUPERBLOCK_SIZE].fill(0);
        },
        &p.zoned,
    );
    assert!(
        stderr(&run).contains("geometry mkfs gives"),
        "{}",
        stderr(&run)
    );
}

#[test]
fn salvage_refuses_an_existing_destination_and_get_r_copies_a_subtree() {
    let p = pristine(true);
    let tmp = tempfile::tempdir().unwrap();
    let pool = tmp.path().join("p.pool");
    std::fs::write(&pool, &p.image).unwrap();
    let pool = pool.to_str().unwrap();
    let taken = tmp.path().to_str().unwrap();
    let run = amberfs(&["salvage", pool, taken]);
    assert_eq!(run.status.code(), Some(1));
    assert!(stderr(&run).contains("exists already"), "{}", stderr(&run));
    let dest = tmp.path().join("copy");
    let run = amberfs(&["get", "-r", pool, "/b", dest.to_str().unwrap()]);
    assert!(run.status.success(), "{}", stderr(&run));
    assert!(std::fs::read(dest.join("c/f3")).unwrap() == p.files[2].data);
    assert_eq!(
        std::fs::read_link(dest.join("c/link")).unwrap(),
        Path::new("../f4")
    );
    assert!(!dest.join("a").exists());
    // Into an existing directory, under its name, as cp -r does.
    let run = amberfs(&["get", "-r", pool, "/a", dest.to_str().unwrap()]);
    assert!(run.status.success(), "{}", stderr(&run));
    assert!(std::fs::read(dest.join("a/f2")).unwrap() == p.files[1].data);
}

#[test]
fn a_damaged_directory_inode_sends_its_subtree_to_lost_and_found() {
    let p = pristine(true);
    let b = inode_at(&p.image, p.dir_b);
    let (_tmp, out, run) = salvage_after(&p, |img| img[b + 1] = 0xFF, &HashSet::new());
    let err = stderr(&run);
    assert!(err.contains("skipped /b:"), "{err}");
    let c = out.join(format!("lost+found/#{}", p.dir_c));
    assert!(
        c.join("f5").is_file(),
        "/b/c keeps its names in lost+found: {err}"
    );
}

#[test]
fn a_crashed_pool_with_a_damaged_zone_is_recovered_leniently() {
    let p = pristine(false);
    let header = superblock(&p.image).regions[REGION_ZONE_START] as usize * 4096;
    let (_tmp, _out, run) = salvage_after(&p, |img| img[header + 12] ^= 0x40, &p.zoned);
    assert!(run.status.success(), "{}", stderr(&run));
}
