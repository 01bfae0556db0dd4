//! Mapped files (design.md §16) under every policy, on a pool file in
//! /dev/shm so windows show the pool's own pages: stores through a
//! mapping and `write`/`read` meet on one page both ways, whatever each
//! policy does with the file's other blocks; holes get blocks, pages
//! past the end raise SIGBUS and follow the size; munmap, mprotect and
//! a punch keep the table and the pins right; an unlinked file lives
//! until its last mapping goes; fork keeps what a child may map.
use amber_core::data::FallocMode;
use amber_core::fs::read_superblock;
use amber_core::{Fs, FsError, MapOptions, Mapping, MountOptions, OpenOptions};
use amber_format::{FormatParams, PoolState, BLOCK_SIZE};
use amber_pmem::{MapOptions as DevOptions, MmapDevice};
use amber_sim::SplitMix64;
use std::os::unix::fs::FileExt;

mod common;
use common::{assert_clean, device_of, rw, seed};

const POOL: u64 = 64 << 20;
const BS: usize = BLOCK_SIZE as usize;

/// Every policy with the options that make it do what it does on slow
/// PM (amber and hinfs buffering), and nothing in the background.
const POLICIES: &[&str] = &[
    "policy=amber,amber_buffer=always,hunter_interval=never",
    "policy=amber,amber_buffer=never,hunter_interval=never",
    "policy=hunter,hunter_interval=never",
    "policy=hunter-sync",
    "policy=hunter-lfs,hunter_interval=never",
    "policy=direct",
    "policy=hinfs",
    "policy=cow",
    "policy=finelog",
    "policy=lawn",
    "policy=nova",
];

/// A fresh pool file in /dev/shm formatted for `opts` and mounted; the
/// directory goes with the returned guard.
fn pool(opts: &str) -> (tempfile::TempDir, Fs<MmapDevice>) {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = dir.path().join("p.pool");
    let dev = MmapDevice::create(&path, POOL, &DevOptions::default()).unwrap();
    let o = MountOptions::parse(opts).unwrap();
    let params = FormatParams {
        layout: amber_core::data::layout_for(&o),
        ..FormatParams::for_size(POOL)
    };
    Fs::format(&dev, &params).unwrap();
    (dir, Fs::mount(dev, o).unwrap().0)
}

/// This process's memory, read and written as a program's loads and
/// stores reach it (the kernel copies, so no raw pointer is needed, and
/// a page past the end of file fails with EIO instead of a SIGBUS).
fn memory() -> std::fs::File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/proc/self/mem")
        .unwrap()
}

/// The bytes a window shows at `off`, or the error a load there meets.
fn try_load(m: &Mapping<MmapDevice>, off: usize, len: usize) -> std::io::Result<Vec<u8>> {
    let addr = m.addr().expect("a window");
    assert!(off + len <= m.len() as usize);
    let mut out = vec![0u8; len];
    memory().read_exact_at(&mut out, (addr + off) as u64)?;
    Ok(out)
}

fn load(m: &Mapping<MmapDevice>, off: usize, len: usize) -> Vec<u8> {
    try_load(m, off, len).unwrap()
}

/// Stores `data` at `off` through a window, as a program does.
fn store(m: &Mapping<MmapDevice>, off: usize, data: &[u8]) {
    let addr = m.addr().expect("a window");
    assert!(off + data.len() <= m.len() as usize);
    memory().write_all_at(data, (addr + off) as u64).unwrap();
}

/// Fails with where `got` and `want` first differ (not all their bytes).
fn same(got: &[u8], want: &[u8], what: &str) {
    if got != want {
        let at = got.iter().zip(want).position(|(a, b)| a != b);
        panic!(
            "{what}: {} bytes against {}, first difference at {at:?}",
            got.len(),
            want.len()
        );
    }
}

fn bytes(rng: &mut SplitMix64, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.next_u64() as u8).collect()
}

fn writable() -> MapOptions {
    *MapOptions::new().write(true)
}

/// Writes of every size over a mapped file (partial blocks, whole ones,
/// runs across blocks, appends inside the last block), stores through
/// the mapping between them: after each, the mapping and `read` agree
/// with a model. A write that moved a mapped block would leave the
/// mapping showing the old one.
#[test]
fn writes_and_stores_meet_on_one_page_under_every_policy() {
    let s = seed("AMBER_MAPPED_SEED", 31, "mapped coherence");
    for opts in POLICIES {
        let (_dir, fs) = pool(opts);
        let f = rw(&fs, "/f");
        let size = 16 * BS + 1000;
        let mut rng = SplitMix64::new(s);
        let mut model = bytes(&mut rng, size);
        f.write_at(&model, 0).unwrap();
        f.sync_all().unwrap();
        // What the policy then holds of the file apart from its blocks (a
        // zone slice, a DRAM buffer, an own commit) must be settled into
        // them before the mapping shows them.
        for (off, len) in [(5, 10), (BS + 100, 40), (3 * BS, BS), (9 * BS + 7, 300)] {
            let data = bytes(&mut rng, len);
            f.write_at(&data, off as u64).unwrap();
            model[off..off + len].copy_from_slice(&data);
        }
        let m = f.map(0, (20 * BS) as u64, &writable()).unwrap();
        assert_eq!(
            load(&m, 0, size),
            model,
            "{opts}: the mapping shows the file"
        );
        for round in 0..200 {
            let len = [1, 100, 511, BS, BS + 7, 3 * BS][round % 6];
            let off = (rng.next_u64() as usize) % (size - len);
            let data = bytes(&mut rng, len);
            if round % 3 == 0 {
                store(&m, off, &data);
            } else {
                f.write_at(&data, off as u64).unwrap();
            }
            model[off..off + len].copy_from_slice(&data);
            assert_eq!(
                load(&m, off, len),
                data,
                "{opts}: round {round}, {len} at {off}"
            );
            let mut back = vec![0u8; len];
            f.read_at(&mut back, off as u64).unwrap();
            assert_eq!(back, data, "{opts}: read after round {round}");
        }
        let mut all = vec![0u8; size];
        f.read_at(&mut all, 0).unwrap();
        same(&all, &model, opts);
        m.sync().unwrap();
        drop(m);
        drop(f);
        let dev = device_of(fs, true);
        assert_clean(&dev);
        let fs = Fs::mount(dev, MountOptions::parse(opts).unwrap())
            .unwrap()
            .0;
        let mut back = vec![0u8; size];
        rw(&fs, "/f").read_at(&mut back, 0).unwrap();
        same(&back, &model, &format!("{opts}: after remount"));
    }
}

/// A sparse file's holes under a mapping get zeroed blocks; pages past
/// the end of file follow the size as it grows by write, truncate and
/// fallocate, and hide again when it shrinks, zeros shown past the end
/// in the last page.
#[test]
fn holes_fill_and_the_end_of_file_follows_the_size() {
    for opts in POLICIES {
        let (_dir, fs) = pool(opts);
        let f = rw(&fs, "/s");
        f.write_at(b"head", 0).unwrap();
        f.write_at(b"tail", (5 * BS) as u64).unwrap();
        let m = f.map(0, (12 * BS) as u64, &writable()).unwrap();
        assert_eq!(load(&m, 0, 4), b"head");
        assert_eq!(
            load(&m, BS, 4 * BS),
            vec![0; 4 * BS],
            "{opts}: holes read zero"
        );
        assert_eq!(
            load(&m, 5 * BS + 4, BS - 4),
            vec![0; BS - 4],
            "{opts}: past the end"
        );
        store(&m, 2 * BS, b"into a hole");
        let mut back = [0u8; 11];
        f.read_at(&mut back, (2 * BS) as u64).unwrap();
        assert_eq!(&back, b"into a hole", "{opts}");
        f.write_at(b"grown", (7 * BS + 10) as u64).unwrap();
        assert_eq!(
            load(&m, 7 * BS + 10, 5),
            b"grown",
            "{opts}: a write past the end"
        );
        assert_eq!(load(&m, 6 * BS, BS), vec![0; BS], "{opts}: the gap it left");
        f.set_len((9 * BS) as u64).unwrap();
        assert_eq!(load(&m, 8 * BS, BS), vec![0; BS], "{opts}: truncate up");
        store(&m, 8 * BS, b"x");
        f.set_len((3 * BS + 100) as u64).unwrap();
        assert_eq!(
            load(&m, 3 * BS + 100, BS - 100),
            vec![0; BS - 100],
            "{opts}"
        );
        let info = fs.core().mappings();
        assert_eq!(info.len(), 1);
        f.set_len((4 * BS) as u64).unwrap();
        assert_eq!(load(&m, 3 * BS, BS)[..100], vec![0; 100][..], "{opts}");
        fs.core()
            .fallocate(
                f.ino(),
                0,
                (10 * BS) as u64,
                FallocMode::Allocate { keep_size: false },
            )
            .unwrap();
        assert_eq!(
            load(&m, 9 * BS, BS),
            vec![0; BS],
            "{opts}: fallocate grew it"
        );
        drop(m);
        drop(f);
        assert_clean(&device_of(fs, true));
    }
}

/// A page past the end of file is not there (a load raises SIGBUS, as
/// Linux's do; read through /proc/self/mem, EIO): before the file grows
/// over it, and after it shrinks below it again.
#[test]
fn a_page_past_the_end_is_not_there() {
    let (_dir, fs) = pool("policy=amber");
    let f = rw(&fs, "/b");
    f.write_at(&[7u8; 100], 0).unwrap();
    let m = f.map(0, (4 * BS) as u64, &writable()).unwrap();
    assert_eq!(load(&m, 50, 1), [7], "inside the file");
    assert_eq!(
        load(&m, 200, 1),
        [0],
        "past the end in the last page: zeros"
    );
    assert!(try_load(&m, BS + 1, 1).is_err(), "a page past the end");
    f.set_len((2 * BS) as u64).unwrap();
    assert_eq!(load(&m, BS + 1, 1), [0], "the page is inside the file now");
    f.set_len(10).unwrap();
    assert!(try_load(&m, BS + 1, 1).is_err(), "and past it again");
}

/// An unlinked file stays while a mapping shows it, and goes with its
/// last mapping; the pool checks clean.
#[test]
fn an_unlinked_file_lives_until_its_last_mapping_goes() {
    for opts in ["policy=amber", "policy=direct", "policy=nova"] {
        let (_dir, fs) = pool(opts);
        let f = rw(&fs, "/u");
        f.write_at(&[1u8; 3 * BS], 0).unwrap();
        let m = f.map(0, (3 * BS) as u64, &writable()).unwrap();
        drop(f);
        let before = fs.core().statfs().blocks_free;
        fs.remove_file("/u").unwrap();
        store(&m, 10, b"still here");
        assert_eq!(load(&m, 10, 10), b"still here", "{opts}");
        assert_eq!(
            fs.core().statfs().blocks_free,
            before,
            "{opts}: blocks held"
        );
        m.unmap().unwrap();
        assert!(
            fs.core().statfs().blocks_free >= before + 3,
            "{opts}: freed"
        );
        assert_clean(&device_of(fs, true));
    }
}

/// munmap of a middle part splits a mapping in two, mprotect of part of
/// one splits it too, and the table knows every piece; a punch over a
/// mapped range zeroes it in place, the blocks staying.
#[test]
fn unmap_protect_and_punch_keep_the_table_and_the_pins() {
    let (_dir, fs) = pool("policy=amber");
    let f = rw(&fs, "/t");
    f.write_at(&vec![9u8; 8 * BS], 0).unwrap();
    let m = f.map(0, (8 * BS) as u64, &writable()).unwrap();
    let addr = m.addr().unwrap();
    let core = fs.core();
    assert_eq!(
        core.unmap_range(addr + 2 * BS, BS).unwrap(),
        vec![(addr + 2 * BS, BS)]
    );
    assert_eq!(core.mappings().len(), 2);
    let parts = core
        .protect_range(addr + 4 * BS, 2 * BS, libc::PROT_READ)
        .unwrap();
    assert_eq!(parts, vec![(addr + 4 * BS, 2 * BS)]);
    assert_eq!(core.mappings().len(), 4);
    let at = core.mapping_at(addr + 5 * BS).unwrap();
    assert_eq!(
        (at.off, at.len, at.prot),
        ((4 * BS) as u64, (2 * BS) as u64, libc::PROT_READ)
    );
    core.fallocate(f.ino(), (6 * BS) as u64, BS as u64, FallocMode::PunchHole)
        .unwrap();
    assert_eq!(load(&m, 6 * BS, BS), vec![0; BS], "the punch shows through");
    let mut back = vec![1u8; BS];
    f.read_at(&mut back, (6 * BS) as u64).unwrap();
    assert_eq!(back, vec![0; BS]);
    let report =
        String::from_utf8(core.getxattr(f.ino(), b"user.amberfs.policy").unwrap()).unwrap();
    assert_eq!(report.matches("mapped=").count(), 4, "{report}");
    // Unmapping the whole range unmaps every piece left, once.
    let parts = core.unmap_range(addr, 8 * BS).unwrap();
    assert_eq!(parts.len(), 4, "{parts:?}");
    assert!(core.mappings().is_empty());
    drop(m);
    drop(f);
    assert_clean(&device_of(fs, true));
}

/// A writable shared mapping needs a handle that writes, and none of an
/// append-only file; `PROT_WRITE` cannot be added through mprotect to a
/// mapping made through a read-only handle.
#[test]
fn access_is_checked_as_linux_checks_it() {
    let (_dir, fs) = pool("policy=amber");
    rw(&fs, "/a").write_at(b"data", 0).unwrap();
    let ro = OpenOptions::new().read(true).open(&fs, "/a").unwrap();
    let err = ro.map(0, 4096, &writable()).err().unwrap();
    assert!(matches!(err, FsError::AccessDenied(_)), "{err:?}");
    let m = ro.map(0, 4096, &MapOptions::new()).unwrap();
    let err = fs
        .core()
        .protect_range(m.addr().unwrap(), BS, libc::PROT_READ | libc::PROT_WRITE)
        .unwrap_err();
    assert!(matches!(err, FsError::AccessDenied(_)), "{err:?}");
    let err = rw(&fs, "/a")
        .map(1, 4096, &MapOptions::new())
        .err()
        .unwrap();
    assert!(matches!(err, FsError::InvalidArgument(_)), "{err:?}");
    let err = ro.map(0, 4096, MapOptions::new().sync(true)).err().unwrap();
    assert!(
        matches!(err, FsError::Unsupported(_)),
        "tmpfs is not DAX: {err:?}"
    );
}

/// On a device that cannot map its pages (anonymous memory), a library
/// mapping still pins and takes stores and loads through the device.
#[test]
fn a_library_mapping_works_without_a_window() {
    let dev = MmapDevice::anonymous(POOL, &DevOptions::default()).unwrap();
    Fs::format(&dev, &FormatParams::for_size(POOL)).unwrap();
    let fs = Fs::mount(dev, MountOptions::default()).unwrap().0;
    let f = rw(&fs, "/l");
    f.write_at(&vec![3u8; 2 * BS], 0).unwrap();
    let m = f.map(0, (4 * BS) as u64, &writable()).unwrap();
    assert_eq!(m.addr(), None);
    m.write_at(100, b"stored").unwrap();
    f.write_at(b"written", 200).unwrap();
    let mut back = [0u8; 7];
    m.read_at(200, &mut back).unwrap();
    assert_eq!(&back, b"written");
    let mut back = [0u8; 6];
    f.read_at(&mut back, 100).unwrap();
    assert_eq!(&back, b"stored");
    let err = m.write_at((3 * BS) as u64, b"x").unwrap_err();
    assert!(
        matches!(err, FsError::InvalidArgument(_)),
        "past the end: {err:?}"
    );
    m.sync().unwrap();
    drop(m);
    drop(f);
    assert_clean(&device_of(fs, true));
}

/// After a fork, a mapping's blocks stay pinned when this process unmaps
/// it (the child may still map them): a truncate below them keeps the
/// blocks from reuse until the pool closes, and the pool checks clean.
#[test]
fn blocks_a_child_may_map_are_not_reused_before_the_pool_closes() {
    let (_dir, fs) = pool("policy=direct");
    let f = rw(&fs, "/k");
    f.write_at(&vec![5u8; 4 * BS], 0).unwrap();
    let m = f.map(0, (4 * BS) as u64, &writable()).unwrap();
    fs.core().note_fork();
    m.unmap().unwrap();
    let report =
        String::from_utf8(fs.core().getxattr(f.ino(), b"user.amberfs.policy").unwrap()).unwrap();
    assert!(report.contains("kept_for_child=0-16384"), "{report}");
    let free = fs.core().statfs().blocks_free;
    f.set_len(0).unwrap();
    // Its four data blocks are held (its map node is freed).
    let freed = fs.core().statfs().blocks_free - free;
    assert!(
        freed < 4,
        "the data blocks are held, not freed: {freed} freed"
    );
    drop(f);
    // Unlinked, it lives on for the child until the pool closes, which
    // frees it and leaves the pool clean.
    fs.remove_file("/k").unwrap();
    let dev = device_of(fs, true);
    assert_eq!(read_superblock(&dev).unwrap().state, PoolState::Clean);
    assert_clean(&dev);
}
