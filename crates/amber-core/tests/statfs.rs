//! statfs counts what a change frees as soon as the change returns, under
//! every policy: an unlinked file's blocks and an overwrite's replaced
//! blocks, even while hunter's queues still hold their freeing (they are
//! certain to come back; the allocator reuses them once their records are
//! cleared, which a write that needs them forces).

use amber_core::data::POLICIES;
use amber_core::fs::mount;
use amber_core::{Core, MountOptions, Owner};
use amber_format::{FileKind, ROOT_INO};
use amber_pmem::MmapDevice;

mod common;
use common::formatted_for;

const ME: Owner = Owner::new(0, 0);
const POOL: u64 = 64 << 20;

/// A fresh pool under `policy`, with hunter's workers never waking, so
/// only the change itself can settle anything.
fn fresh(policy: &str) -> Core<MmapDevice> {
    let opts = MountOptions::parse(&format!("policy={policy},hunter_interval=never")).unwrap();
    mount(formatted_for(&opts, POOL), opts).unwrap().0
}

#[test]
fn frees_count_when_the_change_returns() {
    let data = vec![7u8; 16 << 20];
    let blocks = data.len() as u64 / 4096;
    for &policy in POLICIES.iter() {
        let fs = fresh(policy);
        let free = || fs.statfs().blocks_free;
        let f = fs
            .mknod(ROOT_INO, b"f", FileKind::Regular, 0o644, 0, ME)
            .unwrap();
        // After the create: the root directory's first block stays.
        let empty = free();
        fs.write(f.ino, Some(0), &data, false).unwrap();
        fs.fsync(f.ino).unwrap();
        let written = free();
        assert!(
            written <= empty - blocks,
            "{policy}: {written} of {empty} free"
        );
        fs.write(f.ino, Some(0), &data, false).unwrap();
        assert_eq!(free(), written, "{policy}: after an overwrite");
        fs.unlink(ROOT_INO, b"f").unwrap();
        assert_eq!(free(), empty, "{policy}: after the unlink");
        fs.unmount().unwrap();
    }
}

/// What statfs counts free can be taken: all but 512 KiB of it by one
/// fallocate, after another thread's data log took a run it has only
/// begun (its unwritten tail is counted free) and a deleted file's
/// blocks still wait in a queue.
#[test]
fn fallocate_takes_what_statfs_counts_free() {
    for policy in ["amber", "hunter"] {
        let fs = fresh(policy);
        let file = |name: &[u8]| {
            fs.mknod(ROOT_INO, name, FileKind::Regular, 0o644, 0, ME)
                .unwrap()
                .ino
        };
        let (a, b, c) = (file(b"a"), file(b"b"), file(b"c"));
        std::thread::scope(|s| {
            s.spawn(|| {
                fs.write(a, Some(0), &vec![1u8; 1 << 20], false).unwrap();
                fs.fsync(a).unwrap();
            });
        });
        fs.write(b, Some(0), &vec![2u8; 8 << 20], false).unwrap();
        fs.fsync(b).unwrap();
        fs.unlink(ROOT_INO, b"b").unwrap();
        let avail = fs.statfs().blocks_free * 4096;
        let len = avail - (512 << 10);
        let mode = amber_core::data::FallocMode::Allocate { keep_size: false };
        fs.fallocate(c, 0, len, mode)
            .unwrap_or_else(|e| panic!("{policy}: fallocate of {len} of {avail} free: {e}"));
        fs.unmount().unwrap();
    }
}
