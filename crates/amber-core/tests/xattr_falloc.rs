//! Extended attributes, fallocate and SEEK_DATA/SEEK_HOLE, across
//! remounts and crashes.

use amber_core::check::{check, CheckOptions};
use amber_core::data::FallocMode;
use amber_core::fs::{format, mount, read_superblock, XattrSet};
use amber_core::{Core, FsError, MountOptions, Owner};
use amber_format::xattr::FEATURE_XATTR_RUNS;
use amber_format::{FileKind, FormatParams, PoolLayout, ROOT_INO};
use amber_pmem::{MapOptions, MmapDevice};
use std::sync::Arc;

mod common;
use common::{direct, fresh_core};

const ME: Owner = Owner::new(0, 0);

#[test]
fn xattrs_set_get_list_remove_and_survive_remount_and_crash() {
    let (dev, fs) = fresh_core();
    let f = fs
        .mknod(ROOT_INO, b"f", FileKind::Regular, 0o644, 0, ME)
        .unwrap();
    assert_eq!(fs.getxattr(f.ino, b"user.a"), Err(FsError::NoAttribute));
    fs.setxattr(f.ino, b"user.a", b"one", XattrSet::Either)
        .unwrap();
    fs.setxattr(f.ino, b"trusted.b", &[0u8; 1000], XattrSet::Create)
        .unwrap();
    assert_eq!(
        fs.setxattr(f.ino, b"user.a", b"x", XattrSet::Create),
        Err(FsError::AlreadyExists)
    );
    assert_eq!(
        fs.setxattr(f.ino, b"user.z", b"x", XattrSet::Replace),
        Err(FsError::NoAttribute)
    );
    fs.setxattr(f.ino, b"user.a", b"two", XattrSet::Replace)
        .unwrap();
    assert!(fs
        .setxattr(f.ino, b"bad.name", b"x", XattrSet::Either)
        .is_err());
    assert_eq!(
        fs.setxattr(f.ino, b"user.big", &vec![0u8; 65_537], XattrSet::Either),
        Err(FsError::AttributeTooLarge)
    );
    fs.unmount().unwrap();
    drop(fs);
    let (fs, _) = mount(dev.clone(), direct()).unwrap();
    assert_eq!(fs.getxattr(f.ino, b"user.a").unwrap(), b"two");
    let mut names = fs.listxattr(f.ino).unwrap();
    names.sort();
    assert_eq!(names, vec![b"trusted.b".to_vec(), b"user.a".to_vec()]);
    fs.removexattr(f.ino, b"trusted.b").unwrap();
    fs.removexattr(f.ino, b"user.a").unwrap();
    assert!(fs.listxattr(f.ino).unwrap().is_empty());
    let free_before = fs.statfs().blocks_free;
    fs.setxattr(f.ino, b"user.c", b"3", XattrSet::Either)
        .unwrap();
    assert_eq!(fs.statfs().blocks_free, free_before - 1);
    drop(fs); // crash
    let (fs, rep) = mount(dev, direct()).unwrap();
    assert!(!rep.was_clean);
    assert_eq!(fs.getxattr(f.ino, b"user.c").unwrap(), b"3");
    // Removing the file frees its attribute block too.
    let free = fs.statfs().blocks_free;
    fs.unlink(ROOT_INO, b"f").unwrap();
    assert_eq!(fs.statfs().blocks_free, free + 1);
}

/// Attributes that outgrow one block take a run (docs/design.md §2.6):
/// values up to 64 KiB (one byte more is E2BIG), a thousand small ones,
/// ENOSPC only past the run's 128 KiB; the pool takes the run feature
/// with the first run; the list shrinks back into one block, and the
/// runs' blocks are freed; all of it survives a remount and a crash with
/// a clean fsck.
#[test]
fn xattrs_beyond_one_block_take_a_run() {
    let (dev, fs) = fresh_core();
    let f = fs
        .mknod(ROOT_INO, b"f", FileKind::Regular, 0o644, 0, ME)
        .unwrap()
        .ino;
    let free = fs.statfs().blocks_free;
    let runs = || read_superblock(&*dev).unwrap().feature_incompat & FEATURE_XATTR_RUNS != 0;
    fs.setxattr(f, b"user.v", &[1u8; 4070], XattrSet::Either)
        .unwrap();
    assert!(!runs(), "a list that fits one block needs no run");
    for i in 0..1000u32 {
        let name = format!("user.attr{i:04}");
        fs.setxattr(f, name.as_bytes(), &i.to_le_bytes(), XattrSet::Create)
            .unwrap();
    }
    assert!(runs());
    assert_eq!(fs.listxattr(f).unwrap().len(), 1001);
    assert_eq!(
        fs.setxattr(f, b"user.big", &vec![2u8; 65_537], XattrSet::Either),
        Err(FsError::AttributeTooLarge)
    );
    fs.setxattr(f, b"user.big", &vec![2u8; 65_536], XattrSet::Either)
        .unwrap();
    assert_eq!(
        fs.setxattr(f, b"user.big2", &vec![3u8; 65_536], XattrSet::Either),
        Err(FsError::NoSpace)
    );
    fs.unmount().unwrap();
    drop(fs);
    let report = check(&*dev, &CheckOptions::default()).unwrap();
    assert!(report.is_clean(), "{report}");
    let (fs, _) = mount(dev.clone(), direct()).unwrap();
    assert_eq!(fs.getxattr(f, b"user.big").unwrap(), vec![2u8; 65_536]);
    assert_eq!(
        fs.getxattr(f, b"user.attr0999").unwrap(),
        999u32.to_le_bytes()
    );
    fs.removexattr(f, b"user.big").unwrap();
    for i in 0..1000u32 {
        fs.removexattr(f, format!("user.attr{i:04}").as_bytes())
            .unwrap();
    }
    assert_eq!(fs.statfs().blocks_free, free - 1, "back to one block");
    fs.setxattr(f, b"user.big", &vec![4u8; 20_000], XattrSet::Either)
        .unwrap();
    drop(fs); // crash
    assert!(check(&*dev, &CheckOptions::default()).unwrap().is_clean());
    let (fs, _) = mount(dev, direct()).unwrap();
    assert_eq!(fs.getxattr(f, b"user.big").unwrap(), vec![4u8; 20_000]);
    assert_eq!(fs.getxattr(f, b"user.v").unwrap(), vec![1u8; 4070]);
    let before_unlink = fs.statfs().blocks_free;
    fs.unlink(ROOT_INO, b"f").unwrap();
    assert_eq!(
        fs.statfs().blocks_free,
        before_unlink + 6,
        "the run is freed"
    );
}

#[test]
fn fallocate_keep_size_punch_and_seek() {
    let (dev, fs) = fresh_core();
    let f = fs
        .mknod(ROOT_INO, b"f", FileKind::Regular, 0o644, 0, ME)
        .unwrap();
    fs.fallocate(
        f.ino,
        0,
        3 * 4096,
        FallocMode::Allocate { keep_size: false },
    )
    .unwrap();
    let a = fs.getattr(f.ino).unwrap();
    assert_eq!(a.size, 3 * 4096);
    assert_eq!(a.blocks, 3 * 8 + 8); // three data blocks and one map node
    let mut buf = vec![1u8; 3 * 4096];
    fs.read(f.ino, 0, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 0));
    fs.fallocate(
        f.ino,
        1 << 20,
        4096,
        FallocMode::Allocate { keep_size: true },
    )
    .unwrap();
    assert_eq!(fs.getattr(f.ino).unwrap().size, 3 * 4096);
    fs.write(f.ino, Some(0), &vec![9u8; 3 * 4096], false)
        .unwrap();
    fs.fallocate(f.ino, 100, 8900, FallocMode::PunchHole)
        .unwrap();
    let mut buf = vec![0u8; 3 * 4096];
    fs.read(f.ino, 0, &mut buf).unwrap();
    assert!(buf[..100].iter().all(|&b| b == 9));
    assert!(buf[100..9000].iter().all(|&b| b == 0));
    assert!(buf[9000..].iter().all(|&b| b == 9));
    // Block 1 (4096..8192) was wholly punched and is a hole now.
    assert_eq!(fs.seek_data(f.ino, 0, false).unwrap(), 4096);
    assert_eq!(fs.seek_data(f.ino, 4096, true).unwrap(), 8192);
    assert_eq!(fs.seek_data(f.ino, 8192, false).unwrap(), 3 * 4096);
    assert_eq!(
        fs.seek_data(f.ino, 3 * 4096, true),
        Err(FsError::NoSuchOffset)
    );
    fs.unmount().unwrap();
    drop(fs);
    let (fs, _) = mount(dev, direct()).unwrap();
    let mut again = vec![0u8; 3 * 4096];
    fs.read(f.ino, 0, &mut again).unwrap();
    assert_eq!(again, buf);
    assert_eq!(fs.seek_data(f.ino, 0, false).unwrap(), 4096);
}

#[test]
fn extending_over_preallocated_blocks_reads_zeros() {
    let (_dev, fs) = fresh_core();
    let f = fs
        .mknod(ROOT_INO, b"f", FileKind::Regular, 0o644, 0, ME)
        .unwrap();
    fs.write(f.ino, Some(0), &[5u8; 10], false).unwrap();
    fs.fallocate(f.ino, 0, 8192, FallocMode::Allocate { keep_size: true })
        .unwrap();
    fs.write(f.ino, Some(6000), &[7u8; 10], false).unwrap();
    let mut buf = vec![1u8; 6010];
    fs.read(f.ino, 0, &mut buf).unwrap();
    assert!(buf[10..6000].iter().all(|&b| b == 0));
}

/// A range far beyond the pool is refused with ENOSPC, leaving the file
/// as it was.
#[test]
fn allocating_more_than_the_pool_fails_cleanly() {
    let (_dev, fs) = fresh_core();
    let f = fs
        .mknod(ROOT_INO, b"f", FileKind::Regular, 0o644, 0, ME)
        .unwrap();
    fs.write(f.ino, Some(0), &[5u8; 10], false).unwrap();
    let e = fs
        .fallocate(f.ino, 0, 1 << 40, FallocMode::Allocate { keep_size: false })
        .unwrap_err();
    assert_eq!(e, FsError::NoSpace);
    let a = fs.getattr(f.ino).unwrap();
    assert_eq!(a.size, 10);
    let mut buf = vec![0u8; 10];
    fs.read(f.ino, 0, &mut buf).unwrap();
    assert_eq!(buf, [5u8; 10]);
}

/// A fresh pool in the layout `policy` needs, mounted with it.
fn fresh_under(policy: &str) -> (Arc<MmapDevice>, Core<MmapDevice>, MountOptions) {
    let size = 32 << 20;
    let opts = MountOptions::parse(&format!("policy={policy}")).unwrap();
    let dev = Arc::new(MmapDevice::anonymous(size, &MapOptions::default()).unwrap());
    let params = FormatParams {
        layout: amber_core::data::layout_for(&opts),
        ..FormatParams::for_size(size)
    };
    format(&*dev, &params).unwrap();
    let (fs, _) = mount(dev.clone(), opts.clone()).unwrap();
    (dev, fs, opts)
}

/// `len` bytes of `f` from `off`.
fn read_range(fs: &Core<MmapDevice>, ino: u64, off: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![1u8; len];
    let n = fs.read(ino, off, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

/// FALLOC_FL_ZERO_RANGE under every policy: over data with partial
/// blocks at both ends and a hole inside, the range reads as zeros and is
/// allocated (no hole left in it); across the end the size grows, with
/// keep-size it does not (blocks past the end are allocated where the
/// layout keeps any); everything is there after a crash (durable on
/// return, like the other modes).
#[test]
fn zero_range_under_every_policy() {
    const B: u64 = 4096;
    for &policy in amber_core::data::POLICIES.iter() {
        let (dev, fs, opts) = fresh_under(policy);
        let f = fs
            .mknod(ROOT_INO, b"f", FileKind::Regular, 0o644, 0, ME)
            .unwrap();
        fs.write(f.ino, Some(0), &vec![7u8; (4 * B) as usize], false)
            .unwrap();
        fs.fallocate(f.ino, 2 * B, B, FallocMode::PunchHole)
            .unwrap();
        fs.fsync(f.ino).unwrap();
        let zero = |off, len, keep_size| {
            fs.fallocate(f.ino, off, len, FallocMode::ZeroRange { keep_size })
                .unwrap_or_else(|e| panic!("{policy}: zero range @{off}+{len}: {e}"))
        };
        zero(100, 3 * B, false);
        assert_eq!(fs.getattr(f.ino).unwrap().size, 4 * B, "{policy}");
        assert!(
            fs.seek_data(f.ino, 0, false).unwrap() >= 4 * B,
            "{policy}: a hole is left in the zeroed range"
        );
        zero(4 * B - 10, 2 * B, false);
        assert_eq!(fs.getattr(f.ino).unwrap().size, 6 * B - 10, "{policy}");
        let before = fs.getattr(f.ino).unwrap().blocks;
        zero(8 * B, 2 * B, true);
        let after = fs.getattr(f.ino).unwrap();
        assert_eq!(after.size, 6 * B - 10, "{policy}: keep_size grew the file");
        // The split layout keeps no blocks past the size (design §12.7).
        if amber_core::data::layout_for(&opts) == PoolLayout::Classic {
            assert!(
                after.blocks > before,
                "{policy}: keep_size allocated nothing"
            );
        }
        let want = |data: &[u8]| {
            data.len() as u64 == 6 * B - 10
                && data[..100].iter().all(|&b| b == 7)
                && data[100..(3 * B + 100) as usize].iter().all(|&b| b == 0)
                && data[(3 * B + 100) as usize..(4 * B - 10) as usize]
                    .iter()
                    .all(|&b| b == 7)
                && data[(4 * B - 10) as usize..].iter().all(|&b| b == 0)
        };
        assert!(
            want(&read_range(&fs, f.ino, 0, (8 * B) as usize)),
            "{policy}"
        );
        drop(fs); // a crash: nothing but what is durable survives
        let (fs, _) = mount(dev, opts).unwrap();
        let got = read_range(&fs, f.ino, 0, (8 * B) as usize);
        assert!(want(&got), "{policy}: after a crash");
        assert_eq!(
            fs.fallocate(f.ino, 0, 0, FallocMode::ZeroRange { keep_size: false }),
            Err(FsError::InvalidArgument(
                "fallocate range is empty or beyond the largest file"
            ))
        );
    }
}

/// A write drops the file's capabilities (`security.capability`), as
/// Linux's file_remove_privs does for every writer; other attributes
/// stay, and the drop is durable across a remount. Under both layouts'
/// default policies.
#[test]
fn a_write_drops_file_capabilities() {
    let amber_dev = || {
        let size = 32 << 20;
        let dev = Arc::new(MmapDevice::anonymous(size, &MapOptions::default()).unwrap());
        format(&*dev, &FormatParams::for_size(size)).unwrap();
        (dev, MountOptions::default())
    };
    let direct_dev = || {
        let (dev, _) = fresh_core();
        (dev, direct())
    };
    for (dev, opts) in [amber_dev(), direct_dev()] {
        let (fs, _) = mount(dev.clone(), opts.clone()).unwrap();
        let f = fs
            .mknod(ROOT_INO, b"f", FileKind::Regular, 0o755, 0, ME)
            .unwrap()
            .ino;
        let caps = [
            1, 0, 0, 2, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        fs.setxattr(f, b"security.capability", &caps, XattrSet::Either)
            .unwrap();
        fs.setxattr(f, b"user.kept", b"1", XattrSet::Either)
            .unwrap();
        fs.write(f, Some(0), b"new program", false).unwrap();
        assert_eq!(
            fs.getxattr(f, b"security.capability"),
            Err(FsError::NoAttribute)
        );
        assert_eq!(fs.getxattr(f, b"user.kept").unwrap(), b"1");
        fs.fsync(f).unwrap();
        fs.unmount().unwrap();
        drop(fs);
        let (fs, _) = mount(dev, opts).unwrap();
        assert_eq!(
            fs.getxattr(f, b"security.capability"),
            Err(FsError::NoAttribute)
        );
        let mut buf = [0u8; 11];
        fs.read(f, 0, &mut buf).unwrap();
        assert_eq!(&buf, b"new program");
    }
}
