//! MmapDevice: creating, opening, locking, persisting and accounting.

use std::path::PathBuf;

use amber_pmem::{
    Durability, FlushKind, MapError, MapKind, MapOptions, MmapDevice, PmDevice, MIN_POOL_SIZE,
};

const POOL: u64 = 4 << 20;

fn shm_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").expect("tmpfs /dev/shm for test pools")
}

fn forced(kind: FlushKind) -> MapOptions {
    MapOptions {
        flush_override: Some(kind),
        ..MapOptions::default()
    }
}

/// Deterministic bytes that differ at every offset, so a misplaced copy
/// cannot pass.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Writes a mix of every store kind at awkward offsets and makes it durable.
fn write_mix(dev: &impl PmDevice) {
    dev.write(3, &pattern(61, 1));
    for (i, &(off, len)) in [(130, 1), (192, 64), (300, 65), (515, 4096 + 17), (8192, 0)]
        .iter()
        .enumerate()
    {
        dev.write_nt(off, &pattern(len, i as u8 + 2));
    }
    dev.write_nt(16384, &[0xAA; 4096]);
    dev.zero_nt(16384 + 5, 4000);
    dev.store_u64(32768, 0x0123_4567_89AB_CDEF);
    dev.store_u128(32784, 0xFEDC_BA98_7654_3210_0011_2233_4455_6677);
    dev.persist(0, 64 * 1024).unwrap();
}

fn check_mix(dev: &impl PmDevice) {
    let read = |off: u64, len: usize| {
        let mut buf = vec![0; len];
        dev.read(off, &mut buf);
        buf
    };
    assert_eq!(read(3, 61), pattern(61, 1));
    for (i, &(off, len)) in [(130, 1), (192, 64), (300, 65), (515, 4096 + 17)]
        .iter()
        .enumerate()
    {
        assert_eq!(
            read(off, len),
            pattern(len, i as u8 + 2),
            "write_nt at {off}+{len}"
        );
    }
    let zeroed = read(16384, 4096);
    assert!(zeroed[..5].iter().all(|&b| b == 0xAA));
    assert!(zeroed[5..4005].iter().all(|&b| b == 0));
    assert!(zeroed[4005..].iter().all(|&b| b == 0xAA));
    assert_eq!(dev.load_u64(32768), 0x0123_4567_89AB_CDEF);
    assert_eq!(dev.load_u64(32784), 0x0011_2233_4455_6677);
    assert_eq!(dev.load_u64(32792), 0xFEDC_BA98_7654_3210);
}

#[test]
fn create_write_reopen_round_trip() {
    let dir = shm_dir();
    let path = dir.path().join("pool");
    {
        let dev = MmapDevice::create(&path, POOL, &MapOptions::default()).unwrap();
        assert_eq!(dev.size(), POOL);
        write_mix(&dev);
        check_mix(&dev);
    }
    let dev = MmapDevice::open(&path, &MapOptions::default()).unwrap();
    assert_eq!(dev.size(), POOL);
    check_mix(&dev);
}

#[test]
fn every_supported_flush_kind_persists() {
    let dir = shm_dir();
    for kind in FlushKind::ALL.into_iter().filter(|k| k.is_supported()) {
        let path = dir.path().join(kind.name());
        {
            let dev = MmapDevice::create(&path, POOL, &forced(kind)).unwrap();
            assert_eq!(dev.info().flush, kind);
            write_mix(&dev);
        }
        let dev = MmapDevice::open(&path, &forced(kind)).unwrap();
        check_mix(&dev);
    }
}

#[test]
fn msync_durability_on_a_disk_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pool");
    let options = MapOptions {
        durability: Durability::Msync,
        flush_override: None,
    };
    {
        let dev = MmapDevice::create(&path, POOL, &options).unwrap();
        let info = dev.info();
        if info.kind == MapKind::File {
            assert_eq!(info.flush, FlushKind::Msync);
        }
        write_mix(&dev);
    }
    let dev = MmapDevice::open(&path, &forced(FlushKind::Msync)).unwrap();
    check_mix(&dev);
    write_mix(&dev);
    assert!(dev.drain().is_ok());
}

#[test]
fn anonymous_device_round_trip_and_info() {
    let dev = MmapDevice::anonymous(1 << 20, &forced(FlushKind::best_cpu())).unwrap();
    write_mix(&dev);
    check_mix(&dev);
    let info = dev.info();
    assert_eq!(info.kind, MapKind::Anonymous);
    assert!(info.huge_page_aligned);
    assert_eq!(info.path, None);
    let text = info.to_string();
    for field in ["kind:", "flush:", "nt_store:", "cpu:", "map_sync:"] {
        assert!(text.contains(field), "{field} missing from {text}");
    }
}

#[test]
fn info_describes_a_tmpfs_pool() {
    let dir = shm_dir();
    let path = dir.path().join("pool");
    let dev = MmapDevice::create(&path, POOL, &MapOptions::default()).unwrap();
    let info = dev.info();
    assert_eq!(info.path.as_deref(), Some(path.as_path()));
    assert_eq!(info.kind, MapKind::File, "tmpfs is not DAX");
    assert!(!info.map_sync);
    assert!(info.huge_page_aligned);
    assert_eq!(info.size, POOL);
    assert!(!info.cpu_model.is_empty());
}

fn assert_in_use(result: Result<MmapDevice, MapError>) {
    match result {
        Err(err @ MapError::InUse { .. }) => {
            assert!(
                err.to_string().contains("in use by another process"),
                "{err}"
            )
        }
        Err(other) => panic!("expected InUse, got {other}"),
        Ok(_) => panic!("a second open of a locked pool succeeded"),
    }
}

#[test]
fn second_open_in_same_process_is_refused_until_close() {
    let dir = shm_dir();
    let path = dir.path().join("pool");
    let first = MmapDevice::create(&path, POOL, &MapOptions::default()).unwrap();
    assert_in_use(MmapDevice::open(&path, &MapOptions::default()));
    drop(first);
    MmapDevice::open(&path, &MapOptions::default()).unwrap();
}

fn expect_err(result: Result<MmapDevice, MapError>) -> MapError {
    match result {
        Err(e) => e,
        Ok(_) => panic!("mapping unexpectedly succeeded"),
    }
}

#[test]
fn map_errors_say_what_is_wrong() {
    let dir = shm_dir();
    let path = dir.path().join("pool");
    let opts = MapOptions::default();
    let missing = expect_err(MmapDevice::open(&path, &opts));
    assert!(matches!(missing, MapError::NotFound { .. }), "{missing}");
    assert!(missing.to_string().contains("not found"));

    let small = expect_err(MmapDevice::create(&path, MIN_POOL_SIZE - 1, &opts));
    assert!(matches!(small, MapError::TooSmall { .. }), "{small}");
    assert!(!path.exists(), "a refused create leaves no file behind");

    let dev = MmapDevice::create(&path, POOL, &opts).unwrap();
    let exists = expect_err(MmapDevice::create(&path, POOL, &opts));
    assert!(matches!(exists, MapError::AlreadyExists { .. }), "{exists}");
    drop(dev);

    let empty = dir.path().join("empty");
    std::fs::File::create(&empty).unwrap();
    let small = expect_err(MmapDevice::open(&empty, &opts));
    assert!(
        matches!(small, MapError::TooSmall { size: 0, .. }),
        "{small}"
    );

    let not_pool = expect_err(MmapDevice::open(dir.path(), &opts));
    assert!(
        matches!(not_pool, MapError::NotPmCapable { .. }),
        "{not_pool}"
    );
    assert!(not_pool.to_string().contains("directory"));

    let null = expect_err(MmapDevice::open(&PathBuf::from("/dev/null"), &opts));
    assert!(matches!(null, MapError::NotPmCapable { .. }), "{null}");
}

#[test]
fn stats_count_what_was_asked() {
    let dev = MmapDevice::anonymous(1 << 20, &MapOptions::default()).unwrap();
    dev.write(10, &[1; 100]);
    dev.write_nt(1000, &[2; 200]);
    dev.zero_nt(5000, 300);
    dev.store_u64(64, 7);
    dev.store_u128(128, 9);
    dev.flush(0, 130);
    dev.drain().unwrap();
    dev.write_persist(4096, &[3; 64]).unwrap();
    let s = dev.stats();
    assert_eq!(s.bytes_stored, 100 + 8 + 16 + 64);
    assert_eq!(s.bytes_nt, 500);
    assert_eq!(s.lines_flushed, 3 + 1);
    assert_eq!(s.fences, 2);
    assert_eq!(s.bytes_written(), 688);
}

#[test]
fn concurrent_writers_to_disjoint_ranges() {
    let dev = MmapDevice::anonymous(8 << 20, &MapOptions::default()).unwrap();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let dev = &dev;
            s.spawn(move || {
                for i in 0..256u64 {
                    let off = (t * 256 + i) * 4096;
                    dev.write_nt(off, &pattern(4096, (t + i) as u8));
                    dev.store_u128(off + 4080, u128::from(t << 32 | i));
                    dev.flush(off + 4080, 16);
                }
                dev.drain().unwrap();
            });
        }
    });
    let mut buf = vec![0; 4080];
    for t in 0..4u64 {
        for i in 0..256u64 {
            let off = (t * 256 + i) * 4096;
            dev.read(off, &mut buf);
            assert_eq!(buf, pattern(4096, (t + i) as u8)[..4080]);
            assert_eq!(dev.load_u64(off + 4080), t << 32 | i);
        }
    }
    assert_eq!(dev.stats().bytes_nt, 4 * 256 * 4096);
}

fn small_device() -> MmapDevice {
    MmapDevice::anonymous(1 << 16, &MapOptions::default()).unwrap()
}

#[test]
#[should_panic(expected = "out of range")]
fn read_past_end_panics() {
    small_device().read((1 << 16) - 4, &mut [0; 8]);
}

#[test]
#[should_panic(expected = "out of range")]
fn write_nt_past_end_panics() {
    small_device().write_nt(1 << 16, &[1]);
}

#[test]
#[should_panic(expected = "out of range")]
fn flush_with_overflowing_range_panics() {
    small_device().flush(u64::MAX - 2, 8);
}

#[test]
#[should_panic(expected = "out of range")]
fn store_u64_past_end_panics() {
    small_device().store_u64(1 << 16, 1);
}

#[test]
#[should_panic(expected = "misaligned")]
fn misaligned_u128_store_panics() {
    small_device().store_u128(8, 1);
}

#[test]
#[should_panic(expected = "misaligned")]
fn misaligned_u64_load_panics() {
    small_device().load_u64(4);
}
