//! Pools opened read-only: readable, shareable between readers, never
//! written, and a store is refused with a typed error instead of a fault.

use amber_pmem::{MapError, MapOptions, MmapDevice, PersistErrorKind, PmDevice};

const POOL: u64 = 1 << 20;

/// A pool file holding a known pattern, closed again.
fn pool() -> (tempfile::TempDir, std::path::PathBuf, Vec<u8>) {
    let dir = tempfile::tempdir_in("/dev/shm").expect("tmpfs /dev/shm for test pools");
    let path = dir.path().join("ro.pool");
    let bytes: Vec<u8> = (0..POOL).map(|i| (i * 7 % 251) as u8).collect();
    let dev = MmapDevice::create(&path, POOL, &MapOptions::default()).unwrap();
    dev.write_persist(0, &bytes).unwrap();
    drop(dev);
    (dir, path, bytes)
}

#[test]
fn a_read_only_device_reads_and_refuses_every_store_kind() {
    let (_dir, path, bytes) = pool();
    let dev = MmapDevice::open_read_only(&path, &MapOptions::default()).unwrap();
    assert!(dev.read_only());
    assert!(dev.info().read_only);
    let mut buf = vec![0u8; 4096];
    dev.read(8192, &mut buf);
    assert_eq!(buf, bytes[8192..12288]);
    assert_eq!(
        dev.load_u64(64),
        u64::from_le_bytes(bytes[64..72].try_into().unwrap())
    );
    dev.drain().expect("a drain with nothing stored succeeds");
    dev.write(10, &[1; 100]);
    dev.write_nt(4096, &[2; 4096]);
    dev.zero_nt(0, 64);
    dev.store_u64(128, 3);
    dev.store_u128(256, 4);
    dev.store_generated(512, 64, 5);
    dev.flush(0, 8192);
    let err = dev.drain().unwrap_err();
    assert_eq!(err.kind, PersistErrorKind::Refused);
    assert!(
        err.reason.contains("read-only") && err.reason.contains("offset 10"),
        "{err}"
    );
    let mut all = vec![0u8; POOL as usize];
    dev.read(0, &mut all);
    assert!(all == bytes, "a refused store changed the mapping");
    drop(dev);
    assert!(
        std::fs::read(&path).unwrap() == bytes,
        "the pool file changed"
    );
}

#[test]
fn readers_share_a_pool_but_never_with_a_writer() {
    let (_dir, path, _) = pool();
    let a = MmapDevice::open_read_only(&path, &MapOptions::default()).unwrap();
    let b = MmapDevice::open_read_only(&path, &MapOptions::default()).unwrap();
    assert!(matches!(
        MmapDevice::open(&path, &MapOptions::default()),
        Err(MapError::InUse { .. })
    ));
    drop((a, b));
    let w = MmapDevice::open(&path, &MapOptions::default()).unwrap();
    assert!(!w.read_only());
    assert!(matches!(
        MmapDevice::open_read_only(&path, &MapOptions::default()),
        Err(MapError::InUse { .. })
    ));
}

#[test]
fn a_read_only_file_opens_read_only_only() {
    let (_dir, path, bytes) = pool();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o444);
    std::fs::set_permissions(&path, perms).unwrap();
    // Root opens anything read-write; only another user sees EACCES.
    if !nix_is_root() {
        assert!(matches!(
            MmapDevice::open(&path, &MapOptions::default()),
            Err(MapError::PermissionDenied { .. })
        ));
    }
    let dev = MmapDevice::open_read_only(&path, &MapOptions::default()).unwrap();
    let mut first = [0u8; 16];
    dev.read(0, &mut first);
    assert_eq!(first, bytes[..16]);
}

fn nix_is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
}
