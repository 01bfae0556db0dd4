//! Requests at the far end of the largest file, under every policy: a
//! 4 KiB write at the last block a file can have, reads, SEEK_DATA and
//! SEEK_HOLE over the hole below it, a punch and a truncate, a fallocate
//! far beyond the pool, and a remount. Each succeeds or fails with a
//! clean error, and no policy's per-file DRAM grows with the offset.

use amber_core::data::{layout_for, FallocMode, POLICIES};
use amber_core::fs::{format, mount};
use amber_core::types::SetAttr;
use amber_core::{Core, FsError, MountOptions, Owner};
use amber_format::blockmap::MAX_FILE_SIZE;
use amber_format::{FileKind, FormatParams, ROOT_INO};
use amber_pmem::{MapOptions, MmapDevice};
use std::sync::Arc;

const ME: Owner = Owner { uid: 0, gid: 0 };
const POOL: u64 = 32 << 20;
const B: u64 = 4096;

/// Mounts under `policy`, with hunter's index pre-allocation at 16 KiB
/// (the other policies ignore it), so what a far block costs shows.
fn core(dev: &Arc<MmapDevice>, policy: &str) -> Core<MmapDevice> {
    let opts = MountOptions::parse(&format!("policy={policy},hunter_index=16K")).unwrap();
    mount(dev.clone(), opts).unwrap().0
}

fn stat(fs: &Core<MmapDevice>, name: &str) -> Option<u64> {
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
}

fn last_block_of_the_largest_file(policy: &str) {
    {
        let opts = MountOptions::parse(&format!("policy={policy}")).unwrap();
        let dev = Arc::new(MmapDevice::anonymous(POOL, &MapOptions::default()).unwrap());
        let params = FormatParams {
            layout: layout_for(&opts),
            ..FormatParams::for_size(POOL)
        };
        format(&*dev, &params).unwrap();
        let fs = core(&dev, policy);
        let f = fs
            .mknod(ROOT_INO, b"f", FileKind::Regular, 0o644, 0, ME)
            .unwrap();
        let at = MAX_FILE_SIZE - B;
        fs.write(f.ino, Some(at), &[7u8; B as usize], false)
            .unwrap();
        assert_eq!(
            fs.write(f.ino, Some(MAX_FILE_SIZE - 1), &[1u8; 2], false),
            Err(FsError::FileTooLarge)
        );
        if let Some(ix) = stat(&fs, "index_bytes") {
            assert!(ix < 64 << 10, "{policy}: index_bytes {ix}");
        }
        let mut buf = vec![0u8; B as usize];
        assert_eq!(fs.read(f.ino, at, &mut buf).unwrap(), B as usize);
        assert!(buf.iter().all(|&b| b == 7), "{policy}");
        assert_eq!(fs.seek_data(f.ino, 0, true).unwrap(), at, "{policy}");
        assert_eq!(fs.seek_data(f.ino, 0, false).unwrap(), 0, "{policy}");
        assert_eq!(fs.seek_data(f.ino, at, false).unwrap(), MAX_FILE_SIZE);
        fs.fsync(f.ino).unwrap();
        let free = fs.statfs().blocks_free;
        assert_eq!(
            fs.fallocate(f.ino, 0, at, FallocMode::Allocate { keep_size: true }),
            Err(FsError::NoSpace),
            "{policy}"
        );
        assert_eq!(
            fs.statfs().blocks_free,
            free,
            "{policy}: refused, nothing taken"
        );
        fs.fallocate(f.ino, 0, MAX_FILE_SIZE - 2 * B, FallocMode::PunchHole)
            .unwrap();
        fs.unmount().unwrap();
        drop(fs);
        let fs = core(&dev, policy);
        let mut buf = vec![0u8; B as usize];
        fs.read(f.ino, at, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 7), "{policy} after remount");
        let shrink = SetAttr {
            size: Some(B),
            ..SetAttr::default()
        };
        fs.setattr(f.ino, &shrink).unwrap();
        let grow = SetAttr {
            size: Some(MAX_FILE_SIZE),
            ..SetAttr::default()
        };
        fs.setattr(f.ino, &grow).unwrap();
        assert_eq!(fs.seek_data(f.ino, 0, true), Err(FsError::NoSuchOffset));
        fs.unmount().unwrap();
    }
}
