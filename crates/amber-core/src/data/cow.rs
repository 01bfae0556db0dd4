//! The `cow` policy: page copy-on-write as NOVA does it. Every write is
//! all-or-nothing across a crash and durable on return.
//!
//! A write that starts at or past the end of the file (a pure append) goes
//! through `direct`: its bytes are invisible until the size store commits
//! it, so it is already atomic. Any other write gives every file block it
//! touches a new block holding the old bytes merged with the new ones
//! (holes and bytes past the old size read as zeros), and commits them all
//! with one atomic store chosen by the path-copy planner
//! (`inode::plan_path_copy`): nothing the old tree reaches is written
//! before that store, so a crash shows the old blocks or the new ones.
//!
//! When the write also changes the size (it straddles the end) or the mode
//! (kill-privileges), the commit store goes into one journal transaction
//! together with the inode, so data, size and mode change at once.
//! Otherwise the commit is the store, a flush and a fence; the times of
//! such an overwrite wait in DRAM as under `direct`, and a changed block
//! count (holes filled, nodes added) is stored after the commit (a crash
//! in between leaves the count low, which mount corrects).
//!
//! The replaced blocks and map nodes are freed only after the commit is
//! durable, so nothing the durable tree reaches is ever reused. See
//! docs/design.md §10.
//!
//! [`CowStage`] is the same machinery for other policies (LAWN) that
//! replace whole blocks: stage, then commit alone or inside a transaction,
//! then finish.

use super::direct::{note_write, store_first_line, Direct, FSYNC_HEAVY_WRITES};
use super::DataPolicy;
use crate::data::Context;
use crate::error::{FsError, Result};
use crate::inode::{plan_path_copy, CommitStore, InodeState, PathCopy};
use crate::journal::Tx;
use amber_format::blockmap::MAX_FILE_SIZE;
use amber_format::inode::OFF_MAP_ROOT;
use amber_format::{Inode, BLOCK_SIZE};
use amber_pmem::PmDevice;

/// The copy-on-write policy.
pub struct Cow;

/// A copy-on-write of a run of file blocks, staged but not committed: the
/// new data blocks and map nodes are allocated and written (non-temporal
/// stores, not yet fenced), and nothing the file's durable tree reaches
/// has changed. It must end in exactly one of:
///
/// * [`CowStage::commit`] then [`CowStage::finish`]: the write commits by
///   its own atomic store;
/// * [`CowStage::add_to_tx`], the caller's `Core::commit` of that
///   transaction, then [`CowStage::finish`]: the switch is atomic together
///   with the inode (size, mode) and whatever else the transaction holds;
/// * [`CowStage::abandon`]: nothing was committed; the blocks go back.
///
/// All of it runs under the inode's write lock, held from `stage` to
/// `finish`/`abandon`: the plan was made against the tree as it was.
#[must_use = "a staged copy-on-write holds allocated blocks until it is finished or abandoned"]
pub struct CowStage {
    /// (file block, new PM block) for every block of the run, ascending.
    blocks: Vec<(u64, u64)>,
    copy: PathCopy,
    /// The inode's block count once committed.
    blocks_after: u64,
}

impl CowStage {
    /// Stages replacing file blocks `first..=last` of `st` by new blocks.
    /// Each new block starts as the old block's bytes (zeros for a hole);
    /// `fill(file_block, bytes)` changes them to the new contents. Every
    /// block and node is allocated before anything is written, so on error
    /// (ENOSPC) nothing changed and nothing stays allocated.
    pub fn stage<D: PmDevice>(
        fs: Context<'_, D>,
        st: &InodeState,
        first: u64,
        last: u64,
        fill: &mut dyn FnMut(u64, &mut [u8]),
    ) -> Result<CowStage> {
        assert!(first <= last, "empty copy-on-write run");
        assert!(
            last < MAX_FILE_SIZE / BLOCK_SIZE,
            "copy-on-write beyond the largest file"
        );
        let dev = &**fs.device();
        let l = fs.layout();
        let n = usize::try_from(last - first + 1).map_err(|_| FsError::FileTooLarge)?;
        let data = fs
            .blocks()
            .alloc_many(n, st.map.get(first))
            .ok_or(FsError::NoSpace)?;
        let mut nodes = Vec::new();
        let planned = plan_path_copy(
            dev,
            l,
            (st.disk.map_root, st.disk.map_height),
            first,
            &data,
            &mut || {
                let b = fs.blocks().alloc(None)?;
                nodes.push(b);
                Some(b)
            },
        );
        let copy = match planned {
            Ok(c) => c,
            Err(e) => {
                fs.blocks().free_all(&nodes);
                fs.blocks().free_all(&data);
                return Err(e);
            }
        };
        let added = (data.len() + copy.new_nodes.len()) as u64;
        let blocks_after = (st.disk.blocks + added).saturating_sub(copy.replaced.len() as u64);
        let blocks: Vec<(u64, u64)> = (first..=last).zip(data).collect();
        let mut buf = vec![0u8; BLOCK_SIZE as usize];
        for &(fb, b) in &blocks {
            match st.map.get(fb) {
                Some(old) => dev.read(l.block_offset(old), &mut buf),
                None => buf.fill(0),
            }
            fill(fb, &mut buf);
            dev.write_nt(l.block_offset(b), &buf);
        }
        copy.write_nodes(dev, l);
        Ok(CowStage {
            blocks,
            copy,
            blocks_after,
        })
    }

    /// The inode's block count once this copy is committed.
    pub fn blocks_after(&self) -> u64 {
        self.blocks_after
    }

    /// Commits by the one atomic store: fence (the new blocks and nodes
    /// are durable before anything points at them), store, flush, fence.
    /// The inode's block count is not part of it: the caller stores it
    /// afterwards if [`CowStage::blocks_after`] differs (mount corrects a
    /// count a crash left behind). An error means a persist failed (the
    /// file system is poisoned).
    pub fn commit<D: PmDevice>(&self, fs: Context<'_, D>, ino: u64) -> Result<()> {
        fs.drain()?;
        let dev = &**fs.device();
        match self.copy.commit {
            CommitStore::Pointer { offset, value } => {
                dev.store_u64(offset, value);
                dev.flush(offset, 8);
            }
            CommitStore::Root { root, height } => {
                let o = fs.layout().inode_offset(ino) + OFF_MAP_ROOT as u64;
                dev.store_u128(o, root as u128 | (height as u128) << 64);
                dev.flush(o, 16);
            }
        }
        fs.drain()
    }

    /// Puts the commit into `tx` together with inode `ino`: fences the new
    /// blocks and nodes (the transaction's commit must not become durable
    /// before them), sets `inode`'s block count and, for a new root, its
    /// (root, height), adds the pointer store if there is one, then adds
    /// the whole `inode` (so pass it with every other change already
    /// made). The caller commits `tx` and then calls
    /// [`CowStage::finish`].
    pub fn add_to_tx<D: PmDevice>(
        &self,
        fs: Context<'_, D>,
        ino: u64,
        inode: &mut Inode,
        tx: &mut Tx,
    ) -> Result<()> {
        fs.drain()?;
        inode.blocks = self.blocks_after;
        match self.copy.commit {
            CommitStore::Pointer { offset, value } => tx.write_u64(offset, value),
            CommitStore::Root { root, height } => {
                inode.map_root = root;
                inode.map_height = height;
            }
        }
        tx.inode(fs.layout(), ino, inode);
        Ok(())
    }

    /// After the commit is durable: records the new blocks, block count
    /// and root in the DRAM inode and frees the replaced data blocks and
    /// map nodes (no durable tree reaches them any more).
    pub fn finish<D: PmDevice>(self, fs: Context<'_, D>, st: &mut InodeState) {
        for &(fb, b) in &self.blocks {
            st.map.set(fb, b);
        }
        st.disk.blocks = self.blocks_after;
        if let CommitStore::Root { root, height } = self.copy.commit {
            st.disk.map_root = root;
            st.disk.map_height = height;
        }
        fs.blocks().free_all(&self.copy.replaced);
    }

    /// Gives back every block `stage` allocated; only before any commit
    /// store was issued (nothing reaches them yet).
    pub fn abandon<D: PmDevice>(self, fs: Context<'_, D>) {
        fs.blocks().free_all(&self.copy.node_blocks());
        for &(_, b) in &self.blocks {
            fs.blocks().free(b);
        }
    }
}

/// A new block's contents for a copy-on-write of `data` at `off`: `buf`
/// holds file block `fb`'s old bytes; those past `old_size` were never
/// visible and become zeros, and the write's bytes go over them.
pub(super) fn merge_write(fb: u64, buf: &mut [u8], old_size: u64, off: u64, data: &[u8]) {
    let bstart = fb * BLOCK_SIZE;
    let end = off + data.len() as u64;
    let visible = old_size.saturating_sub(bstart).min(BLOCK_SIZE);
    buf[visible as usize..].fill(0);
    let s = off.max(bstart);
    let e = end.min(bstart + BLOCK_SIZE);
    buf[(s - bstart) as usize..(e - bstart) as usize]
        .copy_from_slice(&data[(s - off) as usize..(e - off) as usize]);
}

/// The copy-on-write write of `data` at `off`, which must start inside the
/// file (`off < size`); finelog falls back to it for writes its journal
/// cannot hold.
pub(super) fn write_cow<D: PmDevice>(
    fs: Context<'_, D>,
    st: &mut InodeState,
    off: u64,
    data: &[u8],
    sync: bool,
) -> Result<usize> {
    let end = off + data.len() as u64;
    let old_size = st.disk.size;
    assert!(off < old_size, "copy-on-write of a pure append");
    let stage = CowStage::stage(
        fs,
        st,
        off / BLOCK_SIZE,
        (end - 1) / BLOCK_SIZE,
        &mut |fb, buf| merge_write(fb, buf, old_size, off, data),
    )?;
    let mode_changed = note_write(fs, st);
    if end > old_size || mode_changed {
        // Size or mode change with the data: one transaction.
        let mut d = st.disk.clone();
        d.size = end.max(old_size);
        let mut tx = Tx::new();
        stage.add_to_tx(fs, st.ino, &mut d, &mut tx)?;
        fs.commit(tx)?;
        st.disk = d;
        stage.finish(fs, st);
        st.times_dirty = false;
        return Ok(data.len());
    }
    stage.commit(fs, st.ino)?;
    let count_changed = stage.blocks_after() != st.disk.blocks;
    stage.finish(fs, st);
    if count_changed || sync || st.writes_since_fsync <= FSYNC_HEAVY_WRITES {
        store_first_line(fs, st)?;
        st.times_dirty = false;
    } else {
        st.times_dirty = true;
    }
    Ok(data.len())
}

impl<D: PmDevice> DataPolicy<D> for Cow {
    fn name(&self) -> &'static str {
        "cow"
    }

    fn write(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        data: &[u8],
        sync: bool,
    ) -> Result<usize> {
        if off >= st.disk.size {
            return Direct.write(fs, st, off, data, sync);
        }
        write_cow(fs, st, off, data, sync)
    }

    fn atomic_writes(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::CowStage;
    use crate::fs::{format, mount, Core};
    use crate::inode::CommitStore;
    use crate::journal::Tx;
    use crate::types::{Owner, SetAttr};
    use crate::MountOptions;
    use amber_format::{FileKind, FormatParams, PoolLayout, BLOCK_SIZE, ROOT_INO};
    use amber_pmem::{MapOptions, MmapDevice, PmDevice};
    use std::sync::Arc;

    const BS: u64 = BLOCK_SIZE;

    /// A cow-mounted pool with one file: blocks 0..3 and 510..514 written,
    /// size 1100 blocks (a height-2 tree whose third subtree is missing).
    fn setup() -> (Core<MmapDevice>, u64) {
        let size = 32 << 20;
        let dev = Arc::new(MmapDevice::anonymous(size, &MapOptions::default()).unwrap());
        let params = FormatParams {
            layout: PoolLayout::Classic,
            ..FormatParams::for_size(size)
        };
        format(&*dev, &params).unwrap();
        let (fs, _) = mount(dev, MountOptions::parse("policy=cow").unwrap()).unwrap();
        let me = Owner::new(0, 0);
        let f = fs
            .mknod(ROOT_INO, b"f", FileKind::Regular, 0o644, 0, me)
            .unwrap();
        let set = SetAttr {
            size: Some(1100 * BS),
            ..SetAttr::default()
        };
        fs.setattr(f.ino, &set).unwrap();
        fs.write(f.ino, Some(0), &[1; 3 * BS as usize], false)
            .unwrap();
        fs.write(f.ino, Some(510 * BS), &[2; 4 * BS as usize], false)
            .unwrap();
        (fs, f.ino)
    }

    /// Where each run commits, and that abandoning gives every block back.
    #[test]
    fn one_store_commits_any_run_and_abandon_frees_all() {
        let (fs, ino) = setup();
        let r = fs.inode(ino).unwrap();
        let st = r.write();
        let root = st.disk.map_root;
        assert_eq!(st.disk.map_height, 2);
        let leaf0 = fs.device().load_u64(fs.layout().block_offset(root));
        let free = fs.blocks().free_count();
        let node_off = |node: u64, idx: u64| fs.layout().block_offset(node) + idx * 8;
        let cases: [(u64, u64, CommitStore); 4] = [
            // One block: its leaf entry.
            (
                1,
                1,
                CommitStore::Pointer {
                    offset: node_off(leaf0, 1),
                    value: 0,
                },
            ),
            // Several blocks of one leaf: the leaf is copied, linked into the root.
            (
                0,
                2,
                CommitStore::Pointer {
                    offset: node_off(root, 0),
                    value: 0,
                },
            ),
            // Across two leaves: the root is copied.
            (511, 512, CommitStore::Root { root: 0, height: 2 }),
            // A missing subtree: a new one, linked into the root.
            (
                1030,
                1031,
                CommitStore::Pointer {
                    offset: node_off(root, 2),
                    value: 0,
                },
            ),
        ];
        for (first, last, want) in cases {
            let stage = CowStage::stage(fs.context(), &st, first, last, &mut |_, _| {}).unwrap();
            let got = match stage.copy.commit {
                CommitStore::Pointer { offset, .. } => CommitStore::Pointer { offset, value: 0 },
                CommitStore::Root { height, .. } => CommitStore::Root { root: 0, height },
            };
            assert_eq!(got, want, "run {first}..={last}");
            stage.abandon(fs.context());
            assert_eq!(
                fs.blocks().free_count(),
                free,
                "run {first}..={last} leaked"
            );
        }
        // Growing the tree: the new root is the copy point; the old tree
        // hangs under its entry 0 unchanged.
        let stage = CowStage::stage(fs.context(), &st, 262_144, 262_145, &mut |_, _| {}).unwrap();
        assert!(matches!(
            stage.copy.commit,
            CommitStore::Root { height: 3, .. }
        ));
        assert!(stage.copy.replaced.is_empty());
        let CommitStore::Root { root: top, .. } = stage.copy.commit else {
            unreachable!()
        };
        let (_, entries) = stage
            .copy
            .new_nodes
            .iter()
            .find(|(b, _)| *b == top)
            .unwrap();
        assert_eq!(entries[0], root, "the old tree is entry 0 of the new root");
        stage.abandon(fs.context());
        assert_eq!(fs.blocks().free_count(), free);
    }

    /// The transaction form: the switch and a size change in one commit.
    #[test]
    fn add_to_tx_commits_with_the_inode() {
        let (fs, ino) = setup();
        let r = fs.inode(ino).unwrap();
        {
            let mut st = r.write();
            let blocks = st.disk.blocks;
            let stage = CowStage::stage(fs.context(), &st, 1, 2, &mut |fb, buf| {
                buf.fill(fb as u8 + 10);
            })
            .unwrap();
            // Two data blocks replaced, one leaf copied: same count.
            assert_eq!(stage.blocks_after(), blocks);
            let mut d = st.disk.clone();
            d.size = 1200 * BS;
            let mut tx = Tx::new();
            stage.add_to_tx(fs.context(), ino, &mut d, &mut tx).unwrap();
            fs.commit(tx).unwrap();
            st.disk = d;
            stage.finish(fs.context(), &mut st);
        }
        assert_eq!(fs.getattr(ino).unwrap().size, 1200 * BS);
        let mut buf = vec![0u8; 3 * BS as usize];
        fs.read(ino, 0, &mut buf).unwrap();
        assert!(buf[..BS as usize].iter().all(|&b| b == 1));
        assert!(buf[BS as usize..2 * BS as usize].iter().all(|&b| b == 11));
        assert!(buf[2 * BS as usize..].iter().all(|&b| b == 12));
    }
}
