//! The core file system: one mounted pool, its allocators, journals and
//! loaded inodes, and the inode-level operations every front end (library
//! API, FUSE adapter, CLI tools) is built on.

mod acl;
mod attr;
mod entry;
pub(crate) mod flags;
mod lock;
mod mount;
mod namespace;
mod options;
mod rename;
mod salvage;
mod xattr;
mod xattr_store;

pub(crate) use mount::write_superblock;
pub use mount::{format, format_for_replay, mount, read_superblock, RecoveryReport};
pub use options::{AtimeRule, MountOptions, SIMULATED_CPUS};
pub use salvage::salvage;
pub use xattr::XattrSet;

use crate::alloc::{BlockAllocator, Homes, InodeAllocator};
use crate::data::{Context, DataPolicy, FallocMode, FallocStep};
use crate::durability::{Atomicity, Durability};
use crate::error::{FsError, Result};
use crate::inode::{InodeCache, InodeRef, InodeState};
use crate::journal::{Journals, Tx};
use crate::mapped::MapTable;
use crate::split::SplitMedia;
use crate::time::Clock;
use crate::types::{Attr, StatFs};
use crate::zone::Zone;
use amber_format::dirent::NAME_MAX;
use amber_format::Timespec;
use amber_format::{FileKind, Layout, Superblock, BLOCK_SIZE};
use amber_pmem::{PersistError, PmDevice};
use parking_lot::Mutex;
use std::sync::{Arc, OnceLock};

/// A mounted pool.
pub struct Core<D: PmDevice> {
    dev: Arc<D>,
    layout: Layout,
    sb: Mutex<Superblock>,
    journals: Journals,
    blocks: BlockAllocator,
    inos: InodeAllocator,
    /// Each thread's home among the per-CPU structures, numbered per mount.
    homes: Homes,
    cache: InodeCache,
    /// Serializes renames so the directory-cycle check sees a stable tree
    /// (Linux's s_vfs_rename_mutex).
    rename_lock: Mutex<()>,
    /// The first persist failure; set once, read by every write (one
    /// atomic load).
    poisoned: OnceLock<PersistError>,
    policy: Box<dyn DataPolicy<D>>,
    opts: MountOptions,
    clock: Clock,
    /// LAWN's small-write zone, when the policy uses one.
    zone: Option<Zone>,
    /// HUNTER's split layout, when the pool has one.
    split: Option<SplitMedia>,
    /// Every mapping of a file (design.md §16).
    maps: MapTable,
}

impl<D: PmDevice> Core<D> {
    /// The device under the file system (for write accounting).
    pub fn device(&self) -> &Arc<D> {
        &self.dev
    }

    /// The pool's geometry, from its superblock.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The options it was mounted with, after mount settled their
    /// defaults.
    pub fn options(&self) -> &MountOptions {
        &self.opts
    }

    /// The current time for file timestamps, from the mount's clock.
    pub fn now(&self) -> Timespec {
        self.clock.now()
    }

    /// The small-write zone, when the mounted policy uses one.
    pub fn zone(&self) -> Option<&Zone> {
        self.zone.as_ref()
    }

    /// What the mounted policy is handed with every call: its narrow view
    /// of this core (`data::Context`).
    pub fn context(&self) -> Context<'_, D> {
        Context::new(self)
    }

    /// The mounted data policy.
    pub(crate) fn policy(&self) -> &dyn DataPolicy<D> {
        &*self.policy
    }

    /// Every mapping of a file (`mapped/`).
    pub(crate) fn map_table(&self) -> &MapTable {
        &self.maps
    }

    /// Every loaded inode (each file with a mapping, or with blocks kept
    /// for a forked child, is loaded).
    pub(crate) fn loaded(&self) -> Vec<InodeRef> {
        self.cache.all()
    }

    /// The superblock as mounted, for the zone's feature bit and chunk
    /// table (`zone/lifecycle.rs`).
    pub(crate) fn superblock(&self) -> &Mutex<Superblock> {
        &self.sb
    }

    /// The block allocator.
    pub(crate) fn blocks(&self) -> &BlockAllocator {
        &self.blocks
    }

    /// Each thread's home among the per-CPU structures.
    pub(crate) fn homes(&self) -> &Homes {
        &self.homes
    }

    /// The mount's clock.
    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    /// HUNTER's split layout, when the pool has one.
    pub(crate) fn split(&self) -> Option<&SplitMedia> {
        self.split.as_ref()
    }

    /// Starts the policy's background work on a shared core (see
    /// `DataPolicy::spawn`); `Fs::mount` calls it. A read-only mount has
    /// none: every background thread writes.
    pub fn start_background(self: &Arc<Self>) {
        if !self.opts.read_only {
            self.policy.spawn(Arc::downgrade(self));
        }
    }

    /// Whether the pool is mounted read-only (`MountOptions::read_only`).
    pub fn is_read_only(&self) -> bool {
        self.opts.read_only
    }

    /// Fails if the mount is read-only or an earlier persist failed:
    /// nothing more may be written. Every operation that changes the pool
    /// calls it before it changes anything.
    pub(crate) fn check_writable(&self) -> Result<()> {
        if self.opts.read_only {
            return Err(FsError::ReadOnly);
        }
        match self.poisoned.get() {
            Some(e) => Err(FsError::Poisoned(e.clone())),
            None => Ok(()),
        }
    }

    /// Remembers a persist failure; every later write is refused.
    pub(crate) fn poison(&self, e: &FsError) {
        if let FsError::Poisoned(p) = e {
            // Only the first failure is kept.
            let _ = self.poisoned.set(p.clone());
        }
    }

    /// Passes a result through, poisoning on persist failure.
    pub(crate) fn guard<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            self.poison(e);
        }
        r
    }

    /// Drains, poisoning on failure.
    pub(crate) fn drain(&self) -> Result<()> {
        self.guard(self.dev.drain().map_err(FsError::from))
    }

    /// Commits a transaction, poisoning on failure.
    pub(crate) fn commit(&self, tx: Tx) -> Result<()> {
        let r = self.journals.commit(&*self.dev, &self.layout, tx);
        self.guard(r)
    }

    /// The loaded inode `ino`, loading it from PM on first use.
    pub(crate) fn inode(&self, ino: u64) -> Result<InodeRef> {
        if !self.layout.is_valid_ino(ino) {
            return Err(FsError::NotFound);
        }
        self.cache.get(ino, || {
            let mut st = InodeState::load(&*self.dev, &self.layout, ino)?;
            if st.kind() == FileKind::Regular {
                self.policy.load(self.context(), &mut st)?;
            }
            Ok(st)
        })
    }

    /// Attributes of `ino`.
    pub fn getattr(&self, ino: u64) -> Result<Attr> {
        let r = self.inode(ino)?;
        let st = r.read();
        live(&st)?;
        Ok(attr_of(&st))
    }

    /// Space and inode usage.
    pub fn statfs(&self) -> StatFs {
        StatFs {
            block_size: BLOCK_SIZE,
            blocks: self.layout.data_blocks(),
            blocks_free: self.blocks.free_count() + self.policy.free_held_blocks(),
            inodes: self.layout.inode_count - 1,
            inodes_free: self.inos.free_count(),
            name_max: NAME_MAX as u64,
        }
    }

    /// Reads from a file.
    pub fn read(&self, ino: u64, off: u64, buf: &mut [u8]) -> Result<usize> {
        self.read_ref(&self.inode(ino)?, off, buf)
    }

    /// `read` on an inode already looked up (an open handle keeps it).
    pub(crate) fn read_ref(&self, r: &InodeRef, off: u64, buf: &mut [u8]) -> Result<usize> {
        let n = {
            let st = r.read();
            regular(&st)?;
            let n = self.policy.read(self.context(), &st, off, buf)?;
            if !self.atime_due(&st.disk, false, self.now()) {
                return Ok(n);
            }
            n
        };
        self.accessed(r, false);
        Ok(n)
    }

    /// Whether a read of `d` (a directory's entries when `dir`) at `now`
    /// moves its atime under the mount's rule. A read-only mount moves
    /// none (MS_RDONLY does not either).
    pub(crate) fn atime_due(
        &self,
        d: &amber_format::Inode,
        dir: bool,
        now: amber_format::Timespec,
    ) -> bool {
        if self.opts.read_only || (dir && self.opts.nodiratime) {
            return false;
        }
        match self.opts.atime {
            AtimeRule::Never => false,
            AtimeRule::Strict => true,
            AtimeRule::Relative => stale_atime(d, now),
        }
    }

    /// Moves `r`'s atime after a read when the rule says so. In DRAM only;
    /// it is persisted with the other lazy times (fsync, unmount, the
    /// inode's next transaction).
    pub(crate) fn accessed(&self, r: &InodeRef, dir: bool) {
        let mut st = r.write();
        let now = self.now();
        if st.disk.in_use() && self.atime_due(&st.disk, dir, now) {
            st.disk.atime = now;
            st.times_dirty = true;
        }
    }

    /// Writes to a file at `off`, or at its end when `off` is None
    /// (O_APPEND, decided under the inode lock). Returns bytes written and
    /// the offset they were written at.
    pub fn write(
        &self,
        ino: u64,
        off: Option<u64>,
        data: &[u8],
        sync: bool,
    ) -> Result<(usize, u64)> {
        self.write_ref(&self.inode(ino)?, off, data, sync)
    }

    /// `write` on an inode already looked up (an open handle keeps it, so
    /// a write skips the inode-cache lookup).
    pub(crate) fn write_ref(
        &self,
        r: &InodeRef,
        off: Option<u64>,
        data: &[u8],
        sync: bool,
    ) -> Result<(usize, u64)> {
        self.check_writable()?;
        let mut st = r.write();
        regular(&st)?;
        flags::may_write(&st, off)?;
        // A file set to durability=sync, or any file under `-o sync`, is
        // written as if opened O_SYNC: the policies' one sync path,
        // decided here once for every front end.
        let sync = sync || self.opts.sync || st.durability == Durability::Sync;
        let at = off.unwrap_or(st.size());
        // Checked here once, so no policy has to: see `DataPolicy::write`.
        if data.is_empty() {
            return Ok((0, at));
        }
        let end = at.checked_add(data.len() as u64);
        if end.is_none_or(|e| e > amber_format::blockmap::MAX_FILE_SIZE) {
            return Err(FsError::FileTooLarge);
        }
        if st.capability {
            self.drop_capability(&mut st)?;
        }
        if st.maps.is_none() {
            let n = self.policy.write(self.context(), &mut st, at, data, sync);
            return Ok((self.guard(n)?, at));
        }
        let old = st.size();
        let n = if Self::touches_pins(&st, at, data.len() as u64) {
            self.write_over_pins(&mut st, at, data, sync)?
        } else {
            let n = self.policy.write(self.context(), &mut st, at, data, sync);
            self.guard(n)?
        };
        self.follow_size(&mut st, old);
        Ok((n, at))
    }

    /// After a write, fallocate or truncate grew a mapped file: its mappings show
    /// the new blocks. The write itself has happened; where a mapping
    /// cannot show them (no room for a hole's block, no address space)
    /// its pages there stay past the end, SIGBUS, as on a DAX file system
    /// that cannot fill a page at fault, and the next growth tries again.
    pub(crate) fn follow_size(&self, st: &mut InodeState, old: u64) {
        if st.maps.is_some() && st.size() > old {
            let _ = self.follow_growth(st, old);
        }
    }

    /// Preallocates zeroed blocks, punches a hole or zeroes a range
    /// (fallocate), durable on return.
    pub fn fallocate(&self, ino: u64, off: u64, len: u64, mode: FallocMode) -> Result<()> {
        self.check_writable()?;
        let r = self.inode(ino)?;
        let mut st = r.write();
        regular(&st)?;
        match mode {
            // Allocation changes no byte: an append-only file may.
            FallocMode::Allocate { .. } => flags::not_immutable(&st)?,
            FallocMode::PunchHole | FallocMode::ZeroRange { .. } => flags::unchangeable(&st)?,
        }
        // Checked here once, before any policy writes anything back.
        if off
            .checked_add(len)
            .is_none_or(|e| e > amber_format::blockmap::MAX_FILE_SIZE || len == 0)
        {
            return Err(FsError::InvalidArgument(
                "fallocate range is empty or beyond the largest file",
            ));
        }
        let old = st.size();
        for step in mode.steps() {
            if step == FallocStep::PunchHole && Self::touches_pins(&st, off, len) {
                self.punch_over_pins(&mut st, off, len)?;
                continue;
            }
            let res = self
                .policy
                .fallocate(self.context(), &mut st, off, len, step);
            self.guard(res)?;
        }
        self.follow_size(&mut st, old);
        Ok(())
    }

    /// The next offset at or after `off` that holds data (`data`) or is a
    /// hole (`!data`): SEEK_DATA / SEEK_HOLE. The end of the file counts as
    /// a hole. Fails with `NoSuchOffset` at or past the end, or when no
    /// data follows.
    pub fn seek_data(&self, ino: u64, off: u64, data: bool) -> Result<u64> {
        let r = self.inode(ino)?;
        let st = r.read();
        live(&st)?;
        let size = st.size();
        if off >= size {
            return Err(FsError::NoSuchOffset);
        }
        let limit = size.div_ceil(BLOCK_SIZE);
        let fb = off / BLOCK_SIZE;
        let found = if data {
            self.policy.next_data_block(&st, fb, limit)
        } else {
            self.policy.next_hole_block(&st, fb, limit)
        };
        match (found, data) {
            (Some(f), _) => Ok((f * BLOCK_SIZE).max(off)),
            (None, true) => Err(FsError::NoSuchOffset),
            (None, false) => Ok(size),
        }
    }

    /// The durability `ino` asks for (`user.amberfs.durability`).
    pub fn durability(&self, ino: u64) -> Result<Durability> {
        let r = self.inode(ino)?;
        let st = r.read();
        live(&st)?;
        Ok(st.durability)
    }

    /// The atomicity `ino` asks for (`user.amberfs.atomicity`).
    pub fn atomicity(&self, ino: u64) -> Result<Atomicity> {
        let r = self.inode(ino)?;
        let st = r.read();
        live(&st)?;
        Ok(st.atomicity)
    }

    /// Whether writes made with `sync = true` need no fsync afterwards
    /// under the mounted policy (see `DataPolicy::sync_writes_are_complete`).
    pub fn sync_writes_are_complete(&self) -> bool {
        self.policy.sync_writes_are_complete()
    }

    /// Makes a file's data and metadata durable; for a file set to
    /// durability=lazy under a policy that holds writes in DRAM, does
    /// nothing: its data waits for the policy's write-back, syncfs or
    /// unmount (docs/design.md §14).
    pub fn fsync(&self, ino: u64) -> Result<()> {
        let r = self.inode(ino)?;
        let mut st = r.write();
        live(&st)?;
        self.fsync_locked(&mut st)
    }

    /// `fsync` of a file already locked. Stores through the file's
    /// mappings are written back first (`sync_maps`).
    pub(crate) fn fsync_locked(&self, st: &mut InodeState) -> Result<()> {
        if self.nothing_to_sync(st) {
            return Ok(());
        }
        self.sync_maps(st)?;
        let res = self.policy.fsync(self.context(), st);
        self.guard(res)
    }

    /// The policy's fsync of a file already locked, mappings aside
    /// (msync flushes the range it was given itself).
    pub(crate) fn fsync_policy(&self, st: &mut InodeState) -> Result<()> {
        if self.nothing_to_sync(st) {
            return Ok(());
        }
        let res = self.policy.fsync(self.context(), st);
        self.guard(res)
    }

    /// Whether an fsync of `st` has nothing to do: nothing of a read-only
    /// mount waits to become durable, and a durability=lazy file under a
    /// policy that buffers waits for write-back (docs/design.md §14).
    fn nothing_to_sync(&self, st: &InodeState) -> bool {
        self.opts.read_only
            || st.durability == Durability::Lazy
                && st.kind() == FileKind::Regular
                && !self.policy.durable_on_return()
    }

    /// Writes back up to `max_blocks` blocks the policy buffers in DRAM,
    /// least recently written first, as its background threads do (see
    /// `DataPolicy::write_back`); returns how many.
    pub fn write_back(&self, max_blocks: u64) -> Result<u64> {
        self.check_writable()?;
        let res = self.policy.write_back(self.context(), max_blocks);
        self.guard(res)
    }

    /// The mounted policy's counters (empty for policies without any).
    pub fn policy_stats(&self) -> Vec<(String, u64)> {
        self.policy.stats()
    }

    /// Whether a write is durable on return (see
    /// `DataPolicy::durable_on_return`).
    pub fn policy_durable_on_return(&self) -> bool {
        self.policy.durable_on_return()
    }

    /// Whether every write is all-or-nothing across a crash (see
    /// `DataPolicy::atomic_writes`).
    pub fn policy_atomic_writes(&self) -> bool {
        self.policy.atomic_writes()
    }

    /// Whether each file's changes reach PM in order (see
    /// `DataPolicy::ordered_files`).
    pub fn policy_ordered_files(&self) -> bool {
        self.policy.ordered_files()
    }

    /// Counts an open handle, so an unlinked file lives until it is closed.
    pub fn open(&self, ino: u64) -> Result<Attr> {
        let r = self.inode(ino)?;
        let mut st = r.write();
        live(&st)?;
        st.open_count += 1;
        Ok(attr_of(&st))
    }

    /// Drops an open handle; frees the inode if it was the last one and the
    /// file has no links left.
    pub fn release(&self, ino: u64) -> Result<()> {
        let r = self.inode(ino)?;
        let mut st = r.write();
        if st.open_count == 0 {
            return Err(FsError::InvalidArgument(
                "release of a file that is not open",
            ));
        }
        st.open_count -= 1;
        self.free_if_unused(&mut st)
    }

    /// Frees the file if nothing holds it any more: no link, no open
    /// handle, no mapping (each counts in `open_count`).
    pub(crate) fn free_if_unused(&self, st: &mut InodeState) -> Result<()> {
        if st.open_count == 0 && st.disk.nlink == 0 && st.disk.in_use() {
            self.check_writable()?;
            let mut tx = Tx::new();
            let freed = self.free_inode_tx(&mut tx, st)?;
            self.commit(tx)?;
            self.finish_free(st, freed);
        }
        Ok(())
    }
}

/// Whether a read at `now` should move the atime (relatime rules).
fn stale_atime(d: &amber_format::Inode, now: amber_format::Timespec) -> bool {
    const DAY_SECS: i64 = 24 * 60 * 60;
    d.atime <= d.mtime || d.atime <= d.ctime || now.secs - d.atime.secs >= DAY_SECS
}

/// Fails with NotFound for an inode freed since it was looked up.
pub(crate) fn live(st: &InodeState) -> Result<()> {
    if st.disk.in_use() {
        Ok(())
    } else {
        Err(FsError::NotFound)
    }
}

/// Fails unless `st` is a live regular file: only those have contents a
/// data policy reads and writes (a symlink's target is set at creation).
pub(crate) fn regular(st: &InodeState) -> Result<()> {
    live(st)?;
    match st.kind() {
        amber_format::FileKind::Regular => Ok(()),
        amber_format::FileKind::Directory => Err(FsError::IsADirectory),
        _ => Err(FsError::InvalidArgument(
            "only regular files have readable contents",
        )),
    }
}

/// Attributes of a loaded inode.
pub(crate) fn attr_of(st: &InodeState) -> Attr {
    let d = &st.disk;
    Attr {
        ino: st.ino,
        kind: st.kind(),
        perm: d.mode & amber_format::inode::mode::PERM_MASK,
        nlink: d.nlink,
        uid: d.uid,
        gid: d.gid,
        size: st.size(),
        blocks: d.blocks * (BLOCK_SIZE / 512),
        atime: d.atime,
        mtime: d.mtime,
        ctime: d.ctime,
        crtime: d.crtime,
        rdev: d.rdev,
        generation: d.generation,
        flags: d.flags,
    }
}

/// Checks a single path component.
pub(crate) fn check_name(name: &[u8]) -> Result<()> {
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') || name.contains(&0)
    {
        return Err(FsError::InvalidName);
    }
    if name.len() > NAME_MAX {
        return Err(FsError::NameTooLong);
    }
    Ok(())
}
