//! The data-atomic policies, `cow` and `finelog`: overwrites of every shape
//! read back as a byte model says (1 byte to 3 blocks, unaligned, straddling
//! the end, into holes, growing the block map's height, far past its
//! current height); ENOSPC changes nothing; block counts and free counts
//! stay consistent (fsck clean) through many writes; remounts, clean and
//! after a crash (the core dropped without unmount), show the same bytes.
//! Crash atomicity itself is the crash simulator's to check (amber-crash).

use amber_core::check::{check, CheckOptions};
use amber_core::fs::{format, mount};
use amber_core::{Core, FsError, MountOptions, Owner, SetAttr};
use amber_format::{FileKind, BLOCK_SIZE, ROOT_INO};
use amber_pmem::{MapOptions, MmapDevice};
use std::collections::HashMap;
use std::sync::Arc;

mod common;
use common::classic_params;

const ME: Owner = Owner::new(0, 0);
const POLICIES: [&str; 2] = ["cow", "finelog"];
const BS: u64 = BLOCK_SIZE;

fn opts(policy: &str) -> MountOptions {
    MountOptions::parse(&format!("policy={policy}")).unwrap()
}

fn fresh(policy: &str, pool: u64) -> (Arc<MmapDevice>, Core<MmapDevice>) {
    let dev = Arc::new(MmapDevice::anonymous(pool, &MapOptions::default()).unwrap());
    format(&*dev, &classic_params(pool)).unwrap();
    let (fs, _) = mount(dev.clone(), opts(policy)).unwrap();
    (dev, fs)
}

/// A sparse byte model of one file.
#[derive(Default)]
struct Model {
    size: u64,
    blocks: HashMap<u64, Vec<u8>>,
}

impl Model {
    fn write(&mut self, off: u64, data: &[u8]) {
        for (i, &b) in data.iter().enumerate() {
            let at = off + i as u64;
            let blk = self
                .blocks
                .entry(at / BS)
                .or_insert_with(|| vec![0; BS as usize]);
            blk[(at % BS) as usize] = b;
        }
        self.size = self.size.max(off + data.len() as u64);
    }

    fn truncate(&mut self, size: u64) {
        if size < self.size {
            self.blocks.retain(|&fb, _| fb * BS < size);
            if let Some(b) = self.blocks.get_mut(&(size / BS)) {
                b[(size % BS) as usize..].fill(0);
            }
        }
        self.size = size;
    }

    fn read(&self, off: u64, len: u64) -> Vec<u8> {
        let end = (off + len).min(self.size);
        (off..end.max(off))
            .map(|at| {
                self.blocks
                    .get(&(at / BS))
                    .map_or(0, |b| b[(at % BS) as usize])
            })
            .collect()
    }
}

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    (0..len as u64)
        .map(|i| (i.wrapping_mul(31).wrapping_add(seed * 7) % 251) as u8 | 1)
        .collect()
}

/// Compares `[off, off + len)` and the size with the model.
fn same(fs: &Core<MmapDevice>, ino: u64, m: &Model, off: u64, len: u64, what: &str) {
    assert_eq!(fs.getattr(ino).unwrap().size, m.size, "{what}: size");
    let mut buf = vec![0u8; len as usize];
    let n = fs.read(ino, off, &mut buf).unwrap();
    let want = m.read(off, len);
    assert_eq!(n, want.len(), "{what}: bytes read at {off}");
    assert!(buf[..n] == want[..], "{what}: contents at {off}+{len}");
}

/// Writes of many shapes: (offset, length), applied in order after the file
/// was filled to 5 blocks + 100 bytes.
fn shapes() -> Vec<(u64, u64)> {
    let mut v = Vec::new();
    for len in [1, 7, 64, 100, 255, 256, 4095, 4096, 4097, 8192, 3 * BS] {
        for off in [0, 1, 63, BS - 1, BS, 2 * BS + 17] {
            v.push((off, len));
        }
    }
    // Straddling the end, in a hole, across the leaf boundary (height 1 ->
    // 2), far past the current height (a sparse file grown by truncate).
    v.extend([
        (5 * BS + 50, 200),
        (5 * BS + 90, 3 * BS),
        (511 * BS + 10, 2 * BS),
        (700 * BS, 3000),
        (262_143 * BS + 5, 2 * BS),
        (3 * 262_144 * BS + 1, 5000),
        (10, 3 * BS),
        // Too big for finelog's journal: its copy-on-write fallback.
        (100, 8 * BS),
    ]);
    v
}

#[test]
fn overwrites_of_every_shape_match_the_model_and_survive_remounts() {
    for policy in POLICIES {
        let (dev, fs) = fresh(policy, 64 << 20);
        let f = fs
            .mknod(ROOT_INO, b"f", FileKind::Regular, 0o644, 0, ME)
            .unwrap();
        let mut m = Model::default();
        let base = pattern(5 * BS as usize + 100, 1);
        fs.write(f.ino, Some(0), &base, false).unwrap();
        m.write(0, &base);
        let mut grown = false;
        for (i, (off, len)) in shapes().into_iter().enumerate() {
            if off > 600 * BS && !grown {
                // Make the far offsets lie inside the size (not appends).
                let size = 4 * 262_144 * BS;
                let set = SetAttr {
                    size: Some(size),
                    ..SetAttr::default()
                };
                fs.setattr(f.ino, &set).unwrap();
                m.truncate(size);
                grown = true;
            }
            let data = pattern(len as usize, i as u64 + 2);
            let what = format!("{policy} write {i} at {off}+{len}");
            assert_eq!(
                fs.write(f.ino, Some(off), &data, i % 3 == 0).unwrap(),
                (len as usize, off),
                "{what}"
            );
            m.write(off, &data);
            same(&fs, f.ino, &m, off.saturating_sub(BS), len + 2 * BS, &what);
        }
        let regions: Vec<(u64, u64)> = shapes()
            .into_iter()
            .map(|(o, l)| (o.saturating_sub(BS), l + 2 * BS))
            .collect();
        let check_all = |fs: &Core<MmapDevice>, what: &str| {
            for &(o, l) in &regions {
                same(fs, f.ino, &m, o, l, what);
            }
        };
        check_all(&fs, policy);
        // Crash (no unmount): every write was durable on return.
        drop(fs);
        let (fs, rep) = mount(dev.clone(), opts(policy)).unwrap();
        assert!(!rep.was_clean);
        check_all(&fs, &format!("{policy} after crash"));
        let free = fs.statfs().blocks_free;
        fs.unmount().unwrap();
        drop(fs);
        let r = check(&*dev, &CheckOptions { repair: false }).unwrap();
        assert!(r.is_clean(), "{policy}: {r}");
        assert_eq!(r.blocks_free, free, "{policy}: free blocks");
        let (fs, _) = mount(dev.clone(), opts(policy)).unwrap();
        check_all(&fs, &format!("{policy} after remount"));
    }
}

#[test]
fn enospc_changes_nothing() {
    for policy in POLICIES {
        let (dev, fs) = fresh(policy, 8 << 20);
        let f = fs
            .mknod(ROOT_INO, b"f", FileKind::Regular, 0o644, 0, ME)
            .unwrap();
        let mut m = Model::default();
        let data = pattern(4 * BS as usize, 3);
        fs.write(f.ino, Some(0), &data, false).unwrap();
        m.write(0, &data);
        // A hole inside the size, then fill the pool.
        let set = SetAttr {
            size: Some(64 * BS),
            ..SetAttr::default()
        };
        fs.setattr(f.ino, &set).unwrap();
        m.truncate(64 * BS);
        let filler = fs
            .mknod(ROOT_INO, b"filler", FileKind::Regular, 0o644, 0, ME)
            .unwrap();
        let chunk = vec![0x5au8; BS as usize];
        let mut at = 0;
        loop {
            match fs.write(filler.ino, Some(at), &chunk, false) {
                Ok(_) => at += BS,
                Err(FsError::NoSpace) => break,
                Err(e) => panic!("{policy}: filling: {e}"),
            }
            assert!(at < 8 << 20, "{policy}: the pool never filled");
        }
        let free = fs.statfs().blocks_free;
        let mut attr = fs.getattr(f.ino).unwrap();
        // Overwrites needing new blocks: of mapped blocks (cow only:
        // finelog logs those in place), many (finelog's fallback for
        // writes its journal cannot hold), and into a hole.
        let mut tries = vec![(1, 40 * BS as usize), (30 * BS + 5, 10)];
        if policy == "cow" {
            tries.push((10, 4 * BS as usize - 20));
        }
        for (off, len) in tries {
            let r = fs.write(f.ino, Some(off), &pattern(len, 9), false);
            assert_eq!(r, Err(FsError::NoSpace), "{policy}: write at {off}+{len}");
            assert_eq!(fs.statfs().blocks_free, free, "{policy}: blocks leaked");
            // Reads may move atime (relatime); nothing else may change.
            let now = fs.getattr(f.ino).unwrap();
            attr.atime = now.atime;
            assert_eq!(now, attr, "{policy}: inode changed");
            same(&fs, f.ino, &m, 0, 64 * BS, policy);
        }
        fs.unmount().unwrap();
        drop(fs);
        let r = check(&*dev, &CheckOptions { repair: false }).unwrap();
        assert!(r.is_clean(), "{policy}: {r}");
        let (fs, _) = mount(dev.clone(), opts(policy)).unwrap();
        same(&fs, f.ino, &m, 0, 64 * BS, policy);
    }
}

/// A seeded run of many overwrites over several files: block counts, the
/// free count and fsck agree after it, and after a crash and recovery.
#[test]
fn many_writes_keep_counts_consistent() {
    for policy in POLICIES {
        let (dev, fs) = fresh(policy, 32 << 20);
        let mut files = Vec::new();
        for k in 0..4 {
            let name = format!("f{k}");
            let a = fs
                .mknod(ROOT_INO, name.as_bytes(), FileKind::Regular, 0o644, 0, ME)
                .unwrap();
            files.push((a.ino, Model::default()));
        }
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for step in 0..600u64 {
            let k = next(files.len() as u64) as usize;
            let (ino, m) = &mut files[k];
            let off = next(40 * BS);
            let len = 1 + next(if step % 5 == 0 { 5 * BS } else { 600 });
            let data = pattern(len as usize, step);
            fs.write(*ino, Some(off), &data, false).unwrap();
            m.write(off, &data);
            if step % 97 == 0 {
                let size = next(20 * BS);
                let set = SetAttr {
                    size: Some(size),
                    ..SetAttr::default()
                };
                fs.setattr(*ino, &set).unwrap();
                m.truncate(size);
            }
        }
        for (ino, m) in &files {
            same(&fs, *ino, m, 0, m.size, policy);
        }
        let free = fs.statfs().blocks_free;
        drop(fs);
        let r = check(&*dev, &CheckOptions { repair: false }).unwrap();
        assert!(r.is_clean(), "{policy} before recovery: {r}");
        assert_eq!(r.blocks_free, free, "{policy}: free count before recovery");
        let (fs, _) = mount(dev.clone(), opts(policy)).unwrap();
        assert_eq!(
            fs.statfs().blocks_free,
            free,
            "{policy}: free after recovery"
        );
        for (ino, m) in &files {
            same(&fs, *ino, m, 0, m.size, policy);
        }
        fs.unmount().unwrap();
        drop(fs);
        let r = check(&*dev, &CheckOptions { repair: false }).unwrap();
        assert!(r.is_clean(), "{policy}: {r}");
    }
}

#[test]
fn policies_promise_atomic_durable_writes() {
    for policy in POLICIES {
        let (_dev, fs) = fresh(policy, 8 << 20);
        assert!(fs.policy_atomic_writes(), "{policy}");
        assert!(fs.policy_durable_on_return(), "{policy}");
        assert!(fs.sync_writes_are_complete(), "{policy}");
    }
}
