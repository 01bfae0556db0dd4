//! Requests at the far end of the largest file, under every policy: a
//! 4 KiB write at the last block a file can have, reads, SEEK_DATA and
//! SEEK_HOLE over the hole below it, a punch and a truncate, a fallocate
//! far beyond the pool, and a remount. Each succeeds or fails with a
//! clean error, and no policy's per-file DRAM grows with the offset.

use amber_core::data::{FallocMode, POLICIES};
use amber_core::fs::mount;
use amber_core::{Core, FsError, MountOptions, Owner, SetAttr};
use amber_format::blockmap::MAX_FILE_SIZE;
use amber_format::{FileKind, ROOT_INO};
use amber_pmem::MmapDevice;
use std::sync::Arc;

mod common;
use common::formatted_for;

const ME: Owner = Owner::new(0, 0);
const POOL: u64 = 32 << 20;
const B: u64 = 4096;

/// Mounts under `policy`, with hunter's index pre-allocation at 16 KiB
/// (the other policies ignore it), so what a far block costs shows.
fn core(dev: &Arc<MmapDevice>, policy: &str) -> Core<MmapDevice> {
    let opts = MountOptions::parse(&format!("policy={policy},hunter_index=16K")).unwrap();
    mount(dev.clone(), opts).unwrap().0
}

/// The mounted policy's counter `name`, if it has one.
fn counter(fs: &Core<MmapDevice>, name: &str) -> Option<u64> {
    fs.policy_stats()
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
}

/// One test per policy, so a failure names it.
macro_rules! under {
    ($($test:ident: $policy:literal,)*) => {
        $(#[test]
        fn $test() {
            last_block_of_the_largest_file($policy);
        })*

        /// Every policy the build offers has its test above.
        #[test]
        fn every_policy_is_tested() {
            let mut tested = vec![$($policy),*];
            let mut all = POLICIES.to_vec();
            tested.sort_unstable();
            all.sort_unstable();
            assert_eq!(tested, all);
        }
    };
}

under! {
    amber: "amber",
    direct: "direct",
    hinfs: "hinfs",
    hinfs_wb: "hinfs-wb",
    hinfs_nclfw: "hinfs-nclfw",
    cow: "cow",
    finelog: "finelog",
    lawn: "lawn",
    hunter: "hunter",
    hunter_sync: "hunter-sync",
    hunter_lfs: "hunter-lfs",
    nova: "nova",
}

fn last_block_of_the_largest_file(policy: &str) {
    let opts = MountOptions::parse(&format!("policy={policy}")).unwrap();
    let dev = formatted_for(&opts, POOL);
    let fs = core(&dev, policy);
    let ino = write_far_and_look(&fs, policy);
    refuse_and_punch(&fs, ino, policy);
    fs.unmount().unwrap();
    drop(fs);
    let fs = core(&dev, policy);
    let mut buf = vec![0u8; B as usize];
    fs.read(ino, FAR, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 7), "{policy} after remount");
    for size in [B, MAX_FILE_SIZE] {
        let set = SetAttr {
            size: Some(size),
            ..SetAttr::default()
        };
        fs.setattr(ino, &set).unwrap();
    }
    assert_eq!(fs.seek_data(ino, 0, true), Err(FsError::NoSuchOffset));
    fs.unmount().unwrap();
}

/// The last block a file can have.
const FAR: u64 = MAX_FILE_SIZE - B;

/// Writes the last block, one byte past the largest file (EFBIG), and
/// reads and seeks over the hole below it; returns the file.
fn write_far_and_look(fs: &Core<MmapDevice>, policy: &str) -> u64 {
    let f = fs
        .mknod(ROOT_INO, b"f", FileKind::Regular, 0o644, 0, ME)
        .unwrap();
    fs.write(f.ino, Some(FAR), &[7u8; B as usize], false)
        .unwrap();
    assert_eq!(
        fs.write(f.ino, Some(MAX_FILE_SIZE - 1), &[1u8; 2], false),
        Err(FsError::FileTooLarge)
    );
    if let Some(ix) = counter(fs, "index_bytes") {
        assert!(ix < 64 << 10, "{policy}: index_bytes {ix}");
    }
    let mut buf = vec![0u8; B as usize];
    assert_eq!(fs.read(f.ino, FAR, &mut buf).unwrap(), B as usize);
    assert!(buf.iter().all(|&b| b == 7), "{policy}");
    assert_eq!(fs.seek_data(f.ino, 0, true).unwrap(), FAR, "{policy}");
    assert_eq!(fs.seek_data(f.ino, 0, false).unwrap(), 0, "{policy}");
    assert_eq!(fs.seek_data(f.ino, FAR, false).unwrap(), MAX_FILE_SIZE);
    fs.fsync(f.ino).unwrap();
    f.ino
}

/// A fallocate of the whole hole is refused before it takes anything; a
/// punch of it succeeds.
fn refuse_and_punch(fs: &Core<MmapDevice>, ino: u64, policy: &str) {
    let free = fs.statfs().blocks_free;
    let all = FallocMode::Allocate { keep_size: true };
    assert_eq!(
        fs.fallocate(ino, 0, FAR, all),
        Err(FsError::NoSpace),
        "{policy}"
    );
    let after = fs.statfs().blocks_free;
    assert_eq!(after, free, "{policy}: refused, nothing taken");
    fs.fallocate(ino, 0, FAR - B, FallocMode::PunchHole)
        .unwrap();
}
