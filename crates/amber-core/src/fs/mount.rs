//! mkfs, mount (with recovery) and unmount.
//!
//! Mount validates the superblock before writing anything, so a pool with
//! a wrong magic, a newer version, a bad checksum or a truncated file is
//! refused unchanged. After a crash (state Dirty) it replays the journals,
//! frees orphans, and rebuilds the allocators from the inode table and the
//! block maps; after a clean unmount it loads the saved bitmap instead.

use super::{Core, MountOptions};
use crate::alloc::{BitSet, BlockAllocator, Homes, InodeAllocator};
use crate::data;
use crate::data::registry::policies_for;
use crate::error::{FsError, Result};
use crate::filelog::FileLog;
use crate::inode::{read_inode, walk, xattr_run, InodeCache};
use crate::journal::{self, Journals, Tx};
use crate::mapped::MapTable;
use crate::split::{self, SplitMedia};
use crate::time::{self, Clock};
use crate::types::Owner;
use crate::zone::{self, ZoneMedia};
use amber_format::inode::{mode, OFF_BLOCKS, OFF_NLINK};
use amber_format::superblock::SUPERBLOCK_SIZE;
use amber_format::{
    FileKind, FormatError, FormatParams, Inode, Layout, PoolLayout, PoolState, Superblock,
    Timespec, BLOCK_SIZE, INODE_SIZE, ROOT_INO,
};
use amber_pmem::PmDevice;
use parking_lot::Mutex;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// What mount found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The pool was cleanly unmounted; no recovery was needed.
    pub was_clean: bool,
    /// Committed journal transactions replayed.
    pub replayed_transactions: u64,
    /// Torn, uncommitted transactions discarded.
    pub discarded_transactions: u64,
    /// Unlinked-but-open inodes freed.
    pub orphans_freed: u64,
    /// Inodes whose block count was corrected from their block map.
    pub block_counts_fixed: u64,
    /// Small-write-zone descriptors left by interrupted writes or freed
    /// files, cleared.
    pub zone_descriptors_cleared: u64,
    /// Logical-information records left by unpersisted metadata,
    /// truncates or deleted files, cleared (split layout).
    pub records_cleared: u64,
    /// Files whose chain was rewritten after the crash (split layout).
    pub files_relinked: u64,
    /// Inodes in use.
    pub inodes_in_use: u64,
    /// Wall time mount took, recovery included.
    pub duration: Duration,
}

impl std::fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.was_clean {
            return write!(
                f,
                "clean mount: {} inodes in use, {:.1} ms",
                self.inodes_in_use,
                self.duration.as_secs_f64() * 1e3
            );
        }
        write!(
            f,
            "recovered after a crash: replayed {} journal transaction(s), discarded {} torn \
             one(s), freed {} orphan inode(s), fixed {} block count(s), cleared {} stale zone \
             descriptor(s), cleared {} stale logical-information record(s), relinked {} \
             file(s); {} inodes in use, {:.1} ms",
            self.replayed_transactions,
            self.discarded_transactions,
            self.orphans_freed,
            self.block_counts_fixed,
            self.zone_descriptors_cleared,
            self.records_cleared,
            self.files_relinked,
            self.inodes_in_use,
            self.duration.as_secs_f64() * 1e3
        )
    }
}

fn random_uuid() -> [u8; 16] {
    use std::hash::{BuildHasher, Hasher};
    let mut out = [0u8; 16];
    for chunk in out.chunks_mut(8) {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        let t = time::wall();
        h.write_u128(t.secs as u128 ^ (t.nsecs as u128) << 64);
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    out
}

/// Reads both superblock copies and picks the one to trust.
pub fn read_superblock<D: PmDevice>(dev: &D) -> Result<Superblock> {
    if dev.size() < 2 * BLOCK_SIZE {
        return Err(FormatError::Truncated {
            expected: 2 * BLOCK_SIZE,
            actual: dev.size(),
        }
        .into());
    }
    let [a_off, b_off] = Superblock::copy_offsets();
    let mut a = [0u8; SUPERBLOCK_SIZE];
    let mut b = [0u8; SUPERBLOCK_SIZE];
    dev.read(a_off, &mut a);
    dev.read(b_off, &mut b);
    let sb = Superblock::choose(&a, &b)?;
    if sb.pool_size > dev.size() {
        return Err(FormatError::Truncated {
            expected: sb.pool_size,
            actual: dev.size(),
        }
        .into());
    }
    Ok(sb)
}

/// Writes both superblock copies, A then B, each made durable before the
/// next is touched, so one whole copy always survives.
pub fn write_superblock<D: PmDevice>(dev: &D, sb: &Superblock) -> Result<()> {
    let bytes = sb.encode();
    for off in Superblock::copy_offsets() {
        dev.write(off, &bytes);
        dev.persist(off, bytes.len() as u64)?;
    }
    Ok(())
}

/// What a new pool takes from the machine: its uuid, and its root
/// directory's times and owner.
struct Birth {
    uuid: [u8; 16],
    now: Timespec,
    owner: Owner,
}

/// Creates an empty file system on `dev` (mkfs).
pub fn format<D: PmDevice>(dev: &D, params: &FormatParams) -> Result<()> {
    let birth = Birth {
        uuid: random_uuid(),
        now: time::wall(),
        owner: Owner::current_process(),
    };
    format_as(dev, params, &birth)
}

/// `format`, with nothing taken from the machine: the uuid comes from
/// `seed`, the root directory's times are the simulated clock's epoch and
/// its owner is root. The crash harness formats with it, so a run's
/// images are a function of its seed alone.
pub fn format_for_replay<D: PmDevice>(dev: &D, params: &FormatParams, seed: u64) -> Result<()> {
    let mut uuid = [0u8; 16];
    uuid[..8].copy_from_slice(&seed.to_le_bytes());
    uuid[8..].copy_from_slice(b"replayed");
    let birth = Birth {
        uuid,
        now: Timespec {
            secs: time::SIMULATED_EPOCH,
            nsecs: 0,
        },
        owner: Owner::new(0, 0),
    };
    format_as(dev, params, &birth)
}

fn format_as<D: PmDevice>(dev: &D, params: &FormatParams, birth: &Birth) -> Result<()> {
    if params.pool_size > dev.size() {
        return Err(FsError::InvalidArgument("pool size larger than the device"));
    }
    let mut sb = Superblock::new(params, birth.uuid)?;
    let l = sb.layout;
    // Invalidate any older superblock first, so a crash during mkfs never
    // leaves an old file system that looks valid over new metadata.
    dev.zero_nt(0, 2 * BLOCK_SIZE);
    dev.drain()?;
    let meta_start = l.journal_start * BLOCK_SIZE;
    dev.zero_nt(meta_start, l.data_start * BLOCK_SIZE - meta_start);
    let now = birth.now;
    let mut root = Inode::free();
    root.mode = mode::S_IFDIR | 0o755;
    root.nlink = 2;
    root.uid = birth.owner.uid;
    root.gid = birth.owner.gid;
    root.generation = 1;
    root.atime = now;
    root.mtime = now;
    root.ctime = now;
    root.crtime = now;
    root.parent = ROOT_INO;
    dev.write(l.inode_offset(ROOT_INO), &root.encode());
    dev.flush(l.inode_offset(ROOT_INO), INODE_SIZE as u64);
    // The saved bitmap of a fresh pool: metadata blocks in use, and the
    // split layout's regions, zeroed (every record clear, every log empty).
    let mut used = BitSet::new(l.total_blocks);
    for b in 0..l.data_start {
        used.set(b);
    }
    if let Some(r) = sb.split_regions() {
        let from = r.attr_start * BLOCK_SIZE;
        dev.zero_nt(from, r.end() * BLOCK_SIZE - from);
        for b in r.blocks(l.total_blocks) {
            if b >= r.end() {
                dev.zero_nt(b * BLOCK_SIZE, BLOCK_SIZE);
            }
            used.set(b);
        }
    }
    dev.write_nt(l.bitmap_start * BLOCK_SIZE, &used.to_bytes());
    dev.drain()?;
    sb.state = PoolState::Clean;
    write_superblock(dev, &sb)?;
    Ok(())
}

/// Per-inode facts the mount scan gathers.
pub(super) struct Scan {
    free_inos: Vec<u64>,
    orphans: Vec<u64>,
    in_use: u64,
}

pub(super) fn scan_inodes<D: PmDevice>(dev: &D, l: &Layout) -> Scan {
    let mut s = Scan {
        free_inos: Vec::new(),
        orphans: Vec::new(),
        in_use: 0,
    };
    for ino in 1..l.inode_count {
        let (mode, nlink) = mode_and_links(dev, l, ino);
        if mode == 0 {
            s.free_inos.push(ino);
        } else {
            s.in_use += 1;
            if nlink == 0 {
                s.orphans.push(ino);
            }
        }
    }
    s
}

/// Inode `ino`'s mode and link count, its first word: one load touches
/// one line of the inode, where copying all 256 bytes of every inode was
/// most of a clean mount's time on a table of millions.
fn mode_and_links<D: PmDevice>(dev: &D, l: &Layout, ino: u64) -> (u32, u32) {
    const _: () = assert!(OFF_NLINK == 4, "mode then nlink in the first word");
    let word = dev.load_u64(l.inode_offset(ino));
    (word as u32, (word >> 32) as u32)
}

/// Rebuilds block ownership from every live inode's block map, correcting
/// block counts that a crash left behind (a pointer persisted before the
/// inode line that counts it). Fails on a block owned twice.
fn rebuild_used<D: PmDevice>(
    dev: &D,
    l: &Layout,
    zone: Option<&ZoneMedia>,
    (split, nova): (Option<&SplitMedia>, bool),
    report: &mut RecoveryReport,
) -> Result<BitSet> {
    let mut used = BitSet::new(l.total_blocks);
    for b in 0..l.data_start {
        used.set(b);
    }
    for b in split.iter().flat_map(|m| m.regions.blocks(l.total_blocks)) {
        used.set(b);
    }
    for b in zone.iter().flat_map(|z| z.blocks()) {
        if used.set(b) {
            return Err(FsError::Corrupted(format!(
                "block {b} belongs to the small-write zone twice"
            )));
        }
    }
    for ino in 1..l.inode_count {
        let files = match (split.is_some(), nova) {
            (true, _) => Files::Split,
            (false, true) => Files::Nova,
            (false, false) => Files::Classic,
        };
        claim_inode(dev, l, ino, files, &mut used, report)?;
    }
    if let Some(m) = split {
        let r = split::recover(dev, l, m, &mut used)?;
        report.records_cleared = r.cleared;
        report.files_relinked = r.files_relinked;
    }
    dev.drain()?;
    Ok(used)
}

/// Where a pool's regular files keep their blocks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Files {
    /// In block maps, like every other inode.
    Classic,
    /// In HUNTER's split layout (claimed by `split::recover`).
    Split,
    /// In NOVA's per-file logs (claimed here, by replaying each log).
    Nova,
}

/// Marks in `used` the blocks live inode `ino` owns (map, map nodes,
/// attribute block, a nova file's log and the pages it maps), and
/// corrects its block count if a crash left it behind (a regular file of
/// a split or nova pool counts its blocks elsewhere).
fn claim_inode<D: PmDevice>(
    dev: &D,
    l: &Layout,
    ino: u64,
    files: Files,
    used: &mut BitSet,
    report: &mut RecoveryReport,
) -> Result<()> {
    // Most of a big pool's inode table is free: its mode says so without
    // reading (and decoding) the whole inode.
    if mode_and_links(dev, l, ino).0 == 0 {
        return Ok(());
    }
    let i = read_inode(dev, l, ino);
    if i.kind().is_none() {
        return Err(FsError::Corrupted(format!(
            "inode {ino} has invalid mode {:o}",
            i.mode
        )));
    }
    let t = walk(dev, l, i.map_root, i.map_height)?;
    let xattr = xattr_run(dev, l, ino, i.xattr_block)?;
    let data = t.data.iter().map(|(_, b)| *b);
    let regular = i.kind() == Some(FileKind::Regular);
    // Only a nova file has a log; replaying (or walking an empty one)
    // for every other inode was a fifth of a crashed mount's time.
    let log = if files == Files::Nova && regular {
        let read = |off: u64, buf: &mut [u8]| dev.read(off, buf);
        Some(FileLog::replay(&read, l, ino, &i)?)
    } else {
        None
    };
    let logged = log.iter().flat_map(FileLog::blocks);
    for b in data
        .chain(t.nodes.iter().copied())
        .chain(xattr)
        .chain(logged)
    {
        if used.set(b) {
            return Err(FsError::Corrupted(format!("block {b} is owned twice")));
        }
    }
    let count = (t.data.len() + t.nodes.len()) as u64;
    // A split pool's regular files count their blocks in their
    // attribute logs, and their data blocks are found below; a nova
    // file's count is its log's, computed when it is loaded.
    let counted_here = !(files != Files::Classic && regular);
    if counted_here && i.blocks != count {
        let off = l.inode_offset(ino) + OFF_BLOCKS as u64;
        dev.write(off, &count.to_le_bytes());
        dev.flush(off, 8);
        report.block_counts_fixed += 1;
    }
    Ok(())
}

/// Mounts the pool on `dev`, recovering it if it was not cleanly unmounted.
///
/// With `opts.read_only` nothing is stored to `dev`, not even the mark
/// that the pool is mounted, and a pool that needs recovery is refused
/// with [`FsError::NeedsRecovery`] before anything is written (salvage
/// recovers one in DRAM instead, over a `DramOverlay`).
pub fn mount<D: PmDevice>(dev: Arc<D>, opts: MountOptions) -> Result<(Core<D>, RecoveryReport)> {
    let started = Instant::now();
    let policy = data::by_name::<D>(&opts)?;
    let clock = Clock::new(opts.clock);
    if dev.read_only() && !opts.read_only {
        return Err(FsError::InvalidArgument(
            "the pool was opened read-only (its media or permissions allow nothing else): \
             mount it read-only, with the ro option",
        ));
    }
    let mut sb = read_superblock(&*dev)?;
    let l = sb.layout;
    let mut report = RecoveryReport {
        was_clean: sb.state == PoolState::Clean,
        ..Default::default()
    };
    check_root(&*dev, &l)?;
    check_layout(&sb, policy.pool_layout())?;
    // Validate the journals and the zone's header and table before writing
    // anything.
    let split = SplitMedia::of(&sb);
    let found = journal::replay(&*dev, &l, false)?;
    let zone_media = ZoneMedia::read(&*dev, &l, &sb)?;
    let saved = match report.was_clean {
        true => Some(saved_bitmap(
            &*dev,
            &sb,
            found.replayed,
            zone_media.as_ref(),
        )?),
        false => None,
    };
    if opts.read_only {
        if saved.is_none() {
            return Err(FsError::NeedsRecovery);
        }
    } else {
        mark_mounted(&*dev, &mut sb, &clock)?;
    }
    let (used, next_seq, scan) = match saved {
        Some(used) => (used, 1, scan_inodes(&*dev, &l)),
        None => {
            let files = (split.as_ref(), sb.pool_layout() == PoolLayout::Nova);
            recover(&*dev, &l, zone_media.as_ref(), files, &mut report)?
        }
    };
    report.inodes_in_use = scan.in_use;
    let mut core = Core::assemble(
        dev,
        sb,
        &used,
        scan.free_inos,
        next_seq,
        policy,
        opts,
        clock,
    );
    core.settle(scan.orphans, zone_media, &mut report)?;
    report.duration = started.elapsed();
    Ok((core, report))
}

/// The root inode must be a directory: without it nothing is reachable.
pub(super) fn check_root<D: PmDevice>(dev: &D, l: &Layout) -> Result<()> {
    match read_inode(dev, l, ROOT_INO).kind() {
        Some(FileKind::Directory) => Ok(()),
        _ => Err(FsError::Corrupted(
            "the root inode is not a directory".into(),
        )),
    }
}

/// Refuses a policy that cannot use the pool's layout. The message names
/// the policies this pool takes and how to make a pool for the one asked
/// for, from the policy rows (`data::registry`). A classic pool mounted
/// with the default options is the common case: pools made before amber
/// became the default are classic.
fn check_layout(sb: &Superblock, wanted: PoolLayout) -> Result<()> {
    let have = sb.pool_layout();
    if wanted == have {
        return Ok(());
    }
    static TEXTS: OnceLock<Vec<((PoolLayout, PoolLayout), String)>> = OnceLock::new();
    let texts = TEXTS.get_or_init(|| {
        let all = [
            PoolLayout::Classic,
            PoolLayout::Split,
            PoolLayout::Lfs,
            PoolLayout::Nova,
        ];
        let pairs = all.into_iter().flat_map(|h| all.map(|w| (h, w)));
        pairs.map(|(h, w)| ((h, w), layout_refusal(h, w))).collect()
    });
    let text = texts.iter().find(|(k, _)| *k == (have, wanted));
    Err(FsError::InvalidArgument(
        text.map_or("", |(_, t)| t.as_str()),
    ))
}

/// Why a pool of layout `have` cannot be mounted with a policy of layout
/// `wanted`, and what to do instead.
fn layout_refusal(have: PoolLayout, wanted: PoolLayout) -> String {
    let (takes, asked) = (policies_for(have), policies_for(wanted));
    let described = match have {
        PoolLayout::Classic => {
            "the classic layout (made before amber was the default, or with `amberfs mkfs \
             --layout classic`)"
        }
        PoolLayout::Split => "the split layout (mkfs's default)",
        PoolLayout::Lfs => "the lfs layout (HUNTER's records in its data log)",
        PoolLayout::Nova => "the nova layout (NOVA's per-file logs)",
    };
    let mkfs = match wanted {
        PoolLayout::Classic => "`amberfs mkfs --layout classic`",
        PoolLayout::Split => "`amberfs mkfs` (split layout, the default)",
        PoolLayout::Lfs => "`amberfs mkfs --layout lfs`",
        PoolLayout::Nova => "`amberfs mkfs --layout nova`",
    };
    let takes = match takes.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => takes.join(""),
    };
    let asked = match asked.split_first() {
        Some((first, [])) => first.to_string(),
        Some((first, rest)) => format!("{first} (and {})", rest.join(", ")),
        None => "it".to_string(),
    };
    let first = asked.split(' ').next().unwrap_or("it");
    format!(
        "this pool has {described}, which {asked} cannot use: mount it with -o policy={takes}, \
         or make a new pool with {mkfs} for {first}"
    )
}

/// The saved bitmap of a cleanly unmounted pool, after checking that the
/// pool really is clean: no committed transaction, and every block of the
/// zone and the split layout taken.
fn saved_bitmap<D: PmDevice>(
    dev: &D,
    sb: &Superblock,
    committed: u64,
    zone: Option<&ZoneMedia>,
) -> Result<BitSet> {
    let l = &sb.layout;
    if committed > 0 {
        return Err(FsError::Corrupted(
            "pool is marked clean but its journal holds a committed transaction".into(),
        ));
    }
    let mut bytes = vec![0u8; l.total_blocks.div_ceil(8) as usize];
    dev.read(l.bitmap_start * BLOCK_SIZE, &mut bytes);
    let used = BitSet::from_bytes(&bytes, l.total_blocks);
    // The zone writes its chunks without asking the allocator: each must
    // be one the saved bitmap says is taken.
    let split = sb.split_regions();
    let split_blocks = split.iter().flat_map(|r| r.blocks(l.total_blocks));
    if let Some(b) = zone
        .iter()
        .flat_map(|z| z.blocks())
        .chain(split_blocks)
        .find(|&b| !used.get(b))
    {
        return Err(FsError::Corrupted(format!(
            "block {b} of the small-write zone or the split layout is free in the saved bitmap"
        )));
    }
    Ok(used)
}

/// Marks the pool mounted: from here on it is written.
fn mark_mounted<D: PmDevice>(dev: &D, sb: &mut Superblock, clock: &Clock) -> Result<()> {
    sb.state = PoolState::Dirty;
    sb.generation += 1;
    sb.mount_count += 1;
    sb.last_mount_secs = clock.now().secs.max(0) as u64;
    write_superblock(dev, sb)
}

/// Crash recovery: replays the journals and rebuilds block ownership (and
/// the split layout's records). Returns the blocks in use, the next
/// journal sequence number and the inode scan.
pub(super) fn recover<D: PmDevice>(
    dev: &D,
    l: &Layout,
    zone: Option<&ZoneMedia>,
    files: (Option<&SplitMedia>, bool),
    report: &mut RecoveryReport,
) -> Result<(BitSet, u64, Scan)> {
    let r = journal::replay(dev, l, true)?;
    report.replayed_transactions = r.replayed;
    report.discarded_transactions = r.discarded;
    let scan = scan_inodes(dev, l);
    let used = rebuild_used(dev, l, zone, files, report)?;
    Ok((used, r.max_seq + 1, scan))
}

impl<D: PmDevice> Core<D> {
    /// A core over a pool whose blocks in use, free inodes and next
    /// journal sequence number mount (or salvage) has found.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn assemble(
        dev: Arc<D>,
        sb: Superblock,
        used: &BitSet,
        free_inos: Vec<u64>,
        next_seq: u64,
        policy: Box<dyn data::DataPolicy<D>>,
        opts: MountOptions,
        clock: Clock,
    ) -> Core<D> {
        let l = sb.layout;
        let homes = Homes::default();
        Core {
            blocks: BlockAllocator::new(&l, used, homes.clone()),
            inos: InodeAllocator::new(free_inos),
            journals: Journals::new(&l, next_seq, homes.clone()),
            homes,
            cache: InodeCache::default(),
            rename_lock: Mutex::new(()),
            poisoned: OnceLock::new(),
            split: SplitMedia::of(&sb),
            layout: l,
            sb: Mutex::new(sb),
            dev,
            policy,
            opts,
            clock,
            zone: None,
            maps: MapTable::default(),
        }
    }

    /// The last steps of a mount: orphans freed (not by a read-only
    /// mount: they are unreachable anyway), the zone attached, and the
    /// policy told it is mounted (its calibration writes, so a read-only
    /// mount skips it).
    fn settle(
        &mut self,
        orphans: Vec<u64>,
        zone_media: Option<ZoneMedia>,
        report: &mut RecoveryReport,
    ) -> Result<()> {
        if !self.opts.read_only {
            for ino in orphans {
                self.free_orphan(ino)?;
                report.orphans_freed += 1;
            }
        }
        report.inodes_in_use -= report.orphans_freed;
        let want = self.policy.uses_zone().then_some(data::ZoneOptions {
            extents: self.policy.zone_extents(),
            ..self.opts.zone
        });
        let (zone, cleared) = zone::attach(self, zone_media, want.as_ref())?;
        self.zone = zone;
        report.zone_descriptors_cleared = cleared;
        if !self.opts.read_only {
            let res = self.policy.mounted(self.context());
            self.guard(res)?;
        }
        Ok(())
    }

    /// Frees an inode found with no links at mount.
    fn free_orphan(&self, ino: u64) -> Result<()> {
        let r = self.inode(ino)?;
        let mut st = r.write();
        let mut tx = Tx::new();
        let freed = self.free_inode_tx(&mut tx, &mut st)?;
        self.commit(tx)?;
        self.finish_free(&mut st, freed);
        Ok(())
    }

    /// Makes every file's data and metadata durable (syncfs): fsync on
    /// every loaded inode, which is every inode a policy may hold data
    /// for.
    pub fn sync_all(&self) -> Result<()> {
        if self.opts.read_only {
            return Ok(());
        }
        self.check_writable()?;
        for r in self.cache.all() {
            let mut st = r.write();
            if st.disk.in_use() {
                self.sync_maps(&mut st)?;
                let res = self.policy.fsync(self.context(), &mut st);
                self.guard(res)?;
            }
        }
        let res = self.policy.sync_all(self.context());
        self.guard(res)
    }

    /// Has the policy store, for every loaded regular file, what only a
    /// clean mount reads (`DataPolicy::seal`), and fences.
    fn seal_all(&self) -> Result<()> {
        for r in self.cache.all() {
            let mut st = r.write();
            if st.disk.in_use() && st.kind() == FileKind::Regular {
                let res = self.policy.seal(self.context(), &mut st);
                self.guard(res)?;
            }
        }
        self.drain()
    }

    /// Unmounts cleanly: frees unlinked inodes nobody holds open, saves the
    /// allocation bitmap and marks the pool clean. An inode still held
    /// open stays an orphan for the next mount to free.
    pub fn unmount(&self) -> Result<()> {
        // A read-only mount wrote nothing and started no thread: there is
        // nothing to save, and the pool stays exactly as it was found.
        if self.opts.read_only {
            return Ok(());
        }
        self.check_writable()?;
        self.close_maps()?;
        self.policy.unmount(self.context());
        for r in self.cache.all() {
            let mut st = r.write();
            if st.disk.in_use() && st.disk.nlink == 0 && st.open_count == 0 {
                let mut tx = Tx::new();
                let freed = self.free_inode_tx(&mut tx, &mut st)?;
                self.commit(tx)?;
                self.finish_free(&mut st, freed);
            }
        }
        self.sync_all()?;
        self.seal_all()?;
        let l = &self.layout;
        let orphans_left = self.cache.all().iter().any(|r| {
            let st = r.read();
            st.disk.in_use() && st.disk.nlink == 0
        });
        let mut sb = self.sb.lock();
        if !orphans_left {
            let bytes = self.blocks.used_bitmap().to_bytes();
            self.dev.write_nt(l.bitmap_start * BLOCK_SIZE, &bytes);
            self.drain()?;
            sb.state = PoolState::Clean;
            sb.last_clean_secs = self.now().secs.max(0) as u64;
        }
        sb.generation += 1;
        let r = write_superblock(&*self.dev, &sb);
        self.guard(r)
    }
}
